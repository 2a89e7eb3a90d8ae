"""Statistical model checking of brokers: learn latency models, predict by simulation, test by SPRT."""

from mqttlab.smc.grow import Growth, grow_until_plateau
from mqttlab.smc.hostload import HostLoad, HostLoadSampler
from mqttlab.smc.learn import LearnResult, learn
from mqttlab.smc.log import CaseMeta, ExploreLog, LogFormatError, read_log, read_logs, write_log
from mqttlab.smc.models import load_model, save_model
from mqttlab.smc.paper import PaperSettings, run_paper
from mqttlab.smc.predict import Prediction, PredictionSettings, predict
from mqttlab.smc.profiles import UP1, UP2, UsageProfile, load_profile
from mqttlab.smc.simulate import Simulation, simulate
from mqttlab.smc.sprt import SPRT, SequentialTest, SPRTResult
from mqttlab.smc.stats import chernoff_sample_size, clopper_pearson, dkw_epsilon

__all__ = [
    "SPRT",
    "UP1",
    "UP2",
    "CaseMeta",
    "ExploreLog",
    "Growth",
    "HostLoad",
    "HostLoadSampler",
    "LearnResult",
    "LogFormatError",
    "PaperSettings",
    "Prediction",
    "PredictionSettings",
    "SPRTResult",
    "SequentialTest",
    "Simulation",
    "UsageProfile",
    "chernoff_sample_size",
    "clopper_pearson",
    "dkw_epsilon",
    "grow_until_plateau",
    "learn",
    "load_model",
    "load_profile",
    "predict",
    "read_log",
    "read_logs",
    "run_paper",
    "save_model",
    "simulate",
    "write_log",
]
