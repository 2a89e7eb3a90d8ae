//! `mqttlab._engine`: plan JSON in, result JSON out. Only compact summaries and encoded
//! histograms cross into Python; long calls release the GIL and stop cleanly on Ctrl-C.
// The #[pyfunction] macro of this pyo3 generation converts each PyErr into itself; clippy
// flags the generated code, not ours.
#![allow(clippy::useless_conversion)]
use mqttlab_engine::{histogram, summarize as summarize_result, RawResult, RunError, RunPlan};
use pyo3::exceptions::{PyConnectionError, PyKeyboardInterrupt, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

/// The run's error as a Python exception: its message for people, and its `details` attribute
/// (JSON: `kind` and the fields that go with it) for programs, so that Python never parses the
/// message.
fn run_error(py: Python<'_>, e: RunError) -> PyErr {
    let (message, details) = (e.to_string(), e.details().to_string());
    let error = match e {
        RunError::Plan(_) => PyValueError::new_err(message),
        RunError::Connect(_) => PyConnectionError::new_err(message),
        RunError::Host(_) => PyOSError::new_err(message),
    };
    // An attribute cannot fail to be set on a fresh exception instance.
    let _ = error.value_bound(py).setattr("details", details);
    error
}

fn parse_result(s: &str) -> PyResult<RawResult> {
    serde_json::from_str(s).map_err(|e| PyValueError::new_err(format!("not a raw result: {e}")))
}

/// Expands a client-id, topic or filter template as the engine does; see `_engine.pyi`.
#[pyfunction]
fn expand_template(template: &str, index: u32, client_id: &str) -> String {
    mqttlab_engine::template::expand(template, index, client_id)
}

/// Raises this process's open-file limit for `connections` sockets; see `_engine.pyi`.
#[pyfunction]
fn ensure_open_files(connections: u64) -> PyResult<()> {
    mqttlab_engine::limits::ensure_open_files(connections).map_err(PyOSError::new_err)
}

/// Whether a topic filter matches a topic name, as the engine's accounting decides; see `_engine.pyi`.
#[pyfunction]
fn topic_matches(topic_filter: &str, topic: &str) -> bool {
    mqttlab_engine::topic::matches(topic_filter, topic)
}

fn parse_plan(plan_json: &str) -> PyResult<RunPlan> {
    serde_json::from_str(plan_json).map_err(|e| PyValueError::new_err(format!("invalid run plan: {e}")))
}

/// The QoS a plan's deliveries get; see `_engine.pyi`.
#[pyfunction]
fn effective_qos(plan_json: &str) -> PyResult<u8> {
    Ok(parse_plan(plan_json)?.effective_qos())
}

/// How long a plan's schedule lasts, in seconds; see `_engine.pyi`.
#[pyfunction]
fn schedule_length_s(plan_json: &str) -> PyResult<Option<f64>> {
    Ok(mqttlab_engine::pacing::schedule_length_ns(&parse_plan(plan_json)?).map(|ns| ns as f64 / 1e9))
}

/// Every rule a plan breaks, as the engine checks it; see `_engine.pyi`.
#[pyfunction]
fn plan_problems(plan_json: &str) -> PyResult<String> {
    Ok(serde_json::to_string(&parse_plan(plan_json)?.problems()).expect("problems serialise"))
}

/// The encoded size of each packet a plan's clients send; see `_engine.pyi`.
#[pyfunction]
fn packet_sizes(plan_json: &str) -> PyResult<String> {
    let sizes = mqttlab_engine::packets::encoded_sizes(&parse_plan(plan_json)?).map_err(PyValueError::new_err)?;
    Ok(serde_json::to_string(&sizes).expect("sizes serialise"))
}

/// The plan's receiving units as the engine's accounting sees them; see `_engine.pyi`.
#[pyfunction]
fn owed_units(py: Python<'_>, plan_json: &str, max_checks: u64) -> PyResult<Option<String>> {
    let plan = parse_plan(plan_json)?;
    Ok(py.allow_threads(move || {
        let units = mqttlab_engine::accounting::UnitTable::build(&plan);
        if units.wildcard_checks() > max_checks {
            return None;
        }
        let owed: Vec<Vec<&str>> = units
            .expected_units()
            .iter()
            .map(|us| {
                let mut names: Vec<&str> = us.iter().map(|u| units.names[*u as usize].as_str()).collect();
                names.sort_unstable();
                names
            })
            .collect();
        Some(serde_json::json!({"owed": owed, "members": units.members()}).to_string())
    }))
}

/// Runs one shard; see `_engine.pyi`.
#[pyfunction]
#[pyo3(signature = (plan_json, progress=None))]
fn run_shard(py: Python<'_>, plan_json: &str, progress: Option<PyObject>) -> PyResult<String> {
    let plan = RunPlan::from_json(plan_json).map_err(PyValueError::new_err)?;
    let mut handle = mqttlab_engine::start(plan).map_err(|e| run_error(py, e))?;
    let mut callback_error: Option<PyErr> = None;
    loop {
        // The receiver is moved in and out: waiting happens without the GIL.
        let rx = std::mem::replace(&mut handle.progress, std::sync::mpsc::channel().1);
        let (msg, rx) = py.allow_threads(move || (rx.recv_timeout(Duration::from_millis(100)), rx));
        handle.progress = rx;
        match msg {
            Ok(p) => {
                if let (Some(cb), None) = (&progress, &callback_error) {
                    let json = serde_json::to_string(&p).expect("progress serialises");
                    if let Err(e) = cb.call1(py, (json,)) {
                        handle.stop();
                        if !e.is_instance_of::<PyKeyboardInterrupt>(py) {
                            callback_error = Some(e);
                        }
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if let Err(e) = py.check_signals() {
            // Ctrl-C: stop sending, let deliveries under way arrive, return what was measured.
            handle.stop();
            if !e.is_instance_of::<PyKeyboardInterrupt>(py) {
                callback_error = Some(e);
            }
        }
    }
    let result = py.allow_threads(move || handle.join()).map_err(|e| run_error(py, e))?;
    if let Some(e) = callback_error {
        return Err(e);
    }
    Ok(serde_json::to_string(&result).expect("result serialises"))
}

#[pyfunction]
fn merge_results(results_json: Vec<String>) -> PyResult<String> {
    let parts: Vec<RawResult> = results_json.iter().map(|s| parse_result(s)).collect::<PyResult<_>>()?;
    let merged = RawResult::merge(&parts).map_err(PyValueError::new_err)?;
    Ok(serde_json::to_string(&merged).expect("result serialises"))
}

#[pyfunction]
fn summarize(plan_json: &str, result_json: &str) -> PyResult<String> {
    let plan: RunPlan = serde_json::from_str(plan_json).map_err(|e| PyValueError::new_err(format!("invalid run plan: {e}")))?;
    let result = parse_result(result_json)?;
    let summary = summarize_result(&plan, &result).map_err(PyValueError::new_err)?;
    Ok(serde_json::to_string(&summary).expect("summary serialises"))
}

#[pyfunction]
fn histogram_stats(encoded: &str) -> PyResult<String> {
    let h = histogram::decode(encoded).map_err(PyValueError::new_err)?;
    Ok(serde_json::to_string(&histogram::stats(&h)).expect("stats serialise"))
}

#[pyfunction]
fn histogram_merge(encoded: Vec<String>) -> PyResult<String> {
    let mut acc = histogram::new_hist();
    for e in &encoded {
        histogram::add(&mut acc, &histogram::decode(e).map_err(PyValueError::new_err)?);
    }
    Ok(histogram::encode(&acc))
}

/// The instrument's overhead on this host (`calibration`), as JSON: `messages` through a loopback
/// pair at `rate` a second, without the GIL.
#[pyfunction]
fn calibrate(py: Python<'_>, messages: u32, rate: f64) -> PyResult<String> {
    let c = py.allow_threads(|| mqttlab_engine::calibration::calibrate(messages, rate)).map_err(|e| PyConnectionError::new_err(format!("calibration: {e}")))?;
    Ok(serde_json::to_string(&c).expect("a calibration serialises"))
}

/// Runs the embedded rumqttd until the process is told to stop.
#[pyfunction]
fn serve_broker(py: Python<'_>, config_json: &str) -> PyResult<()> {
    let config: rumqttd::Config = serde_json::from_str(config_json).map_err(|e| PyValueError::new_err(format!("invalid rumqttd config: {e}")))?;
    let broker = std::thread::Builder::new()
        .name("rumqttd".into())
        .spawn(move || rumqttd::Broker::new(config).start().map_err(|e| e.to_string()))
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    loop {
        py.allow_threads(|| std::thread::sleep(Duration::from_millis(100)));
        py.check_signals()?;
        if broker.is_finished() {
            return match broker.join() {
                Ok(Err(e)) => Err(PyRuntimeError::new_err(format!("rumqttd stopped: {e}"))),
                _ => Err(PyRuntimeError::new_err("rumqttd stopped")),
            };
        }
    }
}

/// Runs the user-space emulated link (crates/mqttlab-link) until the process is told to stop;
/// writes its counters to `counters_path` as it goes and once more at the end.
#[pyfunction]
fn serve_link(py: Python<'_>, config_json: &str) -> PyResult<()> {
    let config = mqttlab_link::LinkConfig::from_json(config_json).map_err(PyValueError::new_err)?;
    let handle = mqttlab_link::start(&config).map_err(|e| PyOSError::new_err(e.to_string()))?;
    let write_counters = |handle: &mqttlab_link::LinkHandle| -> PyResult<()> {
        let Some(path) = &config.counters_path else { return Ok(()) };
        // Written whole and renamed, so a reader never sees half a file.
        let json = serde_json::to_string(&handle.counters()).expect("counters serialise");
        let partial = format!("{path}.partial");
        std::fs::write(&partial, json)
            .and_then(|_| std::fs::rename(&partial, path))
            .map_err(|e| PyOSError::new_err(format!("cannot write link counters to {path}: {e}")))
    };
    write_counters(&handle)?;
    let partition = config.partition_path.as_deref().map(std::path::Path::new);
    let degrade = config.degrade_path.as_deref().map(std::path::Path::new);
    let mut degraded: Option<std::time::SystemTime> = None; // the degrade file's mtime in force
    let mut tick = 0u64;
    loop {
        // The partition switch is looked at every 10 ms, the counters written every 100 ms.
        tick += 1;
        py.allow_threads(|| std::thread::sleep(Duration::from_millis(10)));
        if let Some(path) = partition {
            handle.set_partitioned(path.exists());
        }
        if let Some(path) = degrade {
            match std::fs::metadata(path).and_then(|m| m.modified()) {
                Ok(mtime) if degraded != Some(mtime) => {
                    let text = std::fs::read_to_string(path).map_err(|e| PyOSError::new_err(format!("cannot read {}: {e}", path.display())))?;
                    let c: mqttlab_link::Conditions =
                        serde_json::from_str(&text).map_err(|e| PyValueError::new_err(format!("invalid link conditions in {}: {e}", path.display())))?;
                    handle.set_conditions(c.up, c.down);
                    degraded = Some(mtime);
                }
                Err(_) if degraded.is_some() => {
                    handle.set_conditions(config.up.clone(), config.down.clone());
                    degraded = None;
                }
                _ => {}
            }
        }
        if !tick.is_multiple_of(10) {
            continue;
        }
        write_counters(&handle)?;
        if let Err(e) = py.check_signals() {
            // Told to stop (SIGINT/SIGTERM): the counters are final as of the write above.
            let _ = handle.stop();
            return Err(e);
        }
        if handle.is_broken() {
            let reason = handle.stop().err().map(|e| e.to_string()).unwrap_or_else(|| "a link thread ended".into());
            return Err(PyRuntimeError::new_err(format!("the emulated link stopped: {reason}")));
        }
    }
}

/// Runs the MQTT-SN gateway until the process is told to stop (Ctrl-C / SIGTERM).
#[pyfunction]
fn serve_gateway(py: Python<'_>, config_json: &str) -> PyResult<()> {
    let config = mqttlab_gateway::GatewayConfig::from_json(config_json).map_err(PyValueError::new_err)?;
    let gateway = mqttlab_gateway::Gateway::start(config).map_err(PyRuntimeError::new_err)?;
    loop {
        py.allow_threads(|| std::thread::sleep(Duration::from_millis(100)));
        if let Err(e) = py.check_signals() {
            py.allow_threads(|| gateway.stop());
            return Err(e);
        }
        if gateway.is_finished() {
            return Err(PyRuntimeError::new_err("the MQTT-SN gateway stopped"));
        }
    }
}

/// Waits for an smc run without the GIL; Ctrl-C stops it at the clients' next message boundary
/// and what was measured comes back with status "interrupted".
fn wait_smc(py: Python<'_>, handle: mqttlab_engine::smc::Handle, progress: Option<PyObject>) -> PyResult<String> {
    let started = std::time::Instant::now();
    let mut callback_error: Option<PyErr> = None;
    let mut last_report = 0u64;
    while !handle.is_finished() {
        py.allow_threads(|| std::thread::sleep(Duration::from_millis(100)));
        if let Err(e) = py.check_signals() {
            handle.stop();
            if !e.is_instance_of::<PyKeyboardInterrupt>(py) {
                callback_error = Some(e);
            }
        }
        let done = handle.messages.load(std::sync::atomic::Ordering::Relaxed);
        if let (Some(cb), None, true) = (&progress, &callback_error, done != last_report) {
            last_report = done;
            let json = format!("{{\"messages\": {done}, \"elapsed_s\": {:.3}}}", started.elapsed().as_secs_f64());
            if let Err(e) = cb.call1(py, (json,)) {
                handle.stop();
                if !e.is_instance_of::<PyKeyboardInterrupt>(py) {
                    callback_error = Some(e);
                }
            }
        }
    }
    let result = py.allow_threads(move || handle.join()).map_err(PyConnectionError::new_err)?;
    match callback_error {
        Some(e) => Err(e),
        None => Ok(result),
    }
}

/// Synchronous random-walk clients with functional checks; see `_engine.pyi`.
#[pyfunction]
#[pyo3(signature = (config_json, progress=None))]
fn smc_explore(py: Python<'_>, config_json: &str, progress: Option<PyObject>) -> PyResult<String> {
    let config = mqttlab_engine::smc::Config::from_json(config_json).map_err(PyValueError::new_err)?;
    wait_smc(py, mqttlab_engine::smc::start_explore(config), progress)
}

/// Clients following a usage profile in real time, as per-client streams of sequences.
#[pyfunction]
#[pyo3(signature = (config_json, progress=None))]
fn smc_profile_run(py: Python<'_>, config_json: &str, progress: Option<PyObject>) -> PyResult<String> {
    let config = mqttlab_engine::smc::Config::from_json(config_json).map_err(PyValueError::new_err)?;
    let handle = mqttlab_engine::smc::start_profile(config).map_err(PyValueError::new_err)?;
    wait_smc(py, handle, progress)
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", mqttlab_engine::VERSION)?;
    // The commit the module was built from (build.rs), which every run's manifest records.
    m.add("__commit__", env!("MQTTLAB_ENGINE_COMMIT"))?;
    m.add_function(wrap_pyfunction!(run_shard, m)?)?;
    m.add_function(wrap_pyfunction!(expand_template, m)?)?;
    m.add_function(wrap_pyfunction!(ensure_open_files, m)?)?;
    m.add_function(wrap_pyfunction!(topic_matches, m)?)?;
    m.add_function(wrap_pyfunction!(owed_units, m)?)?;
    m.add_function(wrap_pyfunction!(effective_qos, m)?)?;
    m.add_function(wrap_pyfunction!(schedule_length_s, m)?)?;
    m.add_function(wrap_pyfunction!(packet_sizes, m)?)?;
    m.add_function(wrap_pyfunction!(plan_problems, m)?)?;
    m.add_function(wrap_pyfunction!(merge_results, m)?)?;
    m.add_function(wrap_pyfunction!(summarize, m)?)?;
    m.add_function(wrap_pyfunction!(histogram_stats, m)?)?;
    m.add_function(wrap_pyfunction!(histogram_merge, m)?)?;
    m.add_function(wrap_pyfunction!(calibrate, m)?)?;
    m.add_function(wrap_pyfunction!(serve_broker, m)?)?;
    m.add_function(wrap_pyfunction!(smc_explore, m)?)?;
    m.add_function(wrap_pyfunction!(smc_profile_run, m)?)?;
    m.add_function(wrap_pyfunction!(serve_gateway, m)?)?;
    m.add_function(wrap_pyfunction!(serve_link, m)?)?;
    Ok(())
}
