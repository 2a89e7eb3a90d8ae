"""ejabberd's MQTT broker (mod_mqtt) from the Debian package ejabberd, run as our own child.

`ejabberdctl` switches to the `ejabberd` user when run as root and always names the node, which
starts Erlang distribution and with it a daemonized epmd on port 4369. We run `erl` ourselves
instead, without a node name: the Erlang VM then opens no distribution port and needs no epmd,
Mnesia keeps its tables in the run's spool folder, and nothing outlives the run.

ejabberd 23.01 has no anonymous MQTT: a CONNECT without a password is refused with "not
authorized" (mod_mqtt_session:authenticate/2 accepts a password-less client only by a verified
TLS client certificate). With `auth_method: anonymous` and `anonymous_protocol: login_anon`, any
user name with any password is accepted, so clients must send the `credentials` below."""

from __future__ import annotations

import glob
import re
import shutil
from pathlib import Path

import yaml

from mqttlab.brokers.base import BrokerError, Launcher, Ports, apt_install
from mqttlab.brokers.erlang import SEARCH_PATH, clean_environment
from mqttlab.tls import TlsMaterial

# The Debian package puts the application under the multiarch library folder.
APP_FILES = "/usr/lib/*/ejabberd-*/ebin/ejabberd.app"
# The XMPP host whose users MQTT clients become (user@HOST/client-id).
HOST = "localhost"


class EjabberdLauncher(Launcher):
    name = "ejabberd"
    how_to_get = ("apt-get install ejabberd (Debian package; MQTT is its mod_mqtt), "
                  "or `mqttlab brokers install ejabberd` as root")
    source = "Debian package ejabberd (23.01 in Debian 12), module mod_mqtt"
    install_time = "about 14 s (apt, with Erlang)"
    mqtt_versions = ("3.1.1", "5")
    #: user name and password every client must send (any pair is accepted, none is refused):
    #: mqttlab's probes and load clients should use these when the scenario names none
    credentials = ("mqttlab", "mqttlab")
    # A cold Erlang VM plus Mnesia's first schema: 2-4 s here on a 2-core machine; ample room when busy.
    start_timeout = 90.0
    required_settings = (
        ("erl run directly without a node name (not ejabberdctl)",
         "ejabberdctl switches to the `ejabberd` user and names the node, which starts a daemonized "
         "epmd on port 4369 that outlives the run; without a name no distribution port is opened"),
        ("EJABBERD_CONFIG_PATH, EJABBERD_LOG_PATH, -mnesia dir, HOME in the work directory",
         "configuration, database and logs belong to the run"),
        ("listen: mod_mqtt only (plain, and TLS with `tls: true` + certfiles)",
         "no XMPP client, server-to-server, HTTP or STUN listener: they are not part of an MQTT benchmark"),
        ("modules: mod_mqtt only", "the XMPP modules the Debian config enables play no part in MQTT"),
        (f"hosts: [{HOST}]", "MQTT clients become users of this host (user@host/client-id)"),
        ("auth_method: anonymous, anonymous_protocol: login_anon, allow_multiple_connections: true",
         "ejabberd has no password-less MQTT login; with these any user name and password is accepted "
         "(clients send mqttlab/mqttlab), also by many clients at once"),
    )
    tuned_settings = (
        ("mod_mqtt max_queue: unlimited",
         "a session queues at most 5000 messages by default; on overflow it clears the whole queue "
         "and ends the session"),
        ("mod_mqtt max_topic_depth: infinity, match_retained_limit: infinity",
         "no topic is refused for having more than 8 levels; a wildcard subscription gets every retained "
         "message, not the first 1000"),
        ("listener max_fsm_queue: 1000000",
         "a session process whose mailbox passes 10000 messages is killed as overloaded; a subscriber "
         "in a fan-in benchmark can pass that briefly"),
        ("listener backlog: 4096", "room for hundreds of clients connecting at once (Debian ships 1000)"),
        ("erl +sbwt none +sbwtdcpu none +sbwtdio none",
         "idle Erlang schedulers spin-wait for work by default: CPU time that is not work, taken from the "
         "load generator on a small machine"),
        ("loglevel: warning", "a log line per connection would cost CPU under load"),
    )

    @staticmethod
    def _app_file() -> Path | None:
        found = sorted(glob.glob(APP_FILES))
        return Path(found[-1]) if found else None

    @staticmethod
    def _erl() -> str | None:
        return shutil.which("erl", path=SEARCH_PATH)

    def find(self) -> bool:
        return self._app_file() is not None and self._erl() is not None

    def version(self) -> str | None:
        app = self._app_file()
        if app is None:
            return None
        try:
            match = re.search(r'\{vsn,\s*"([^"]+)"', app.read_text(errors="replace"))
        except OSError:
            return None
        if match is None:
            return None
        # Debian appends its package revision (23.01-1); the broker's own version is 23.01.
        return f"ejabberd {re.sub(r'-[0-9]+$', '', match.group(1))}"

    def install(self) -> None:
        if self.find():
            return
        apt_install("ejabberd")
        if not self.find():
            raise BrokerError("ejabberd was installed but its Erlang application or erl is missing")

    def _listener(self, port: int, tls: bool) -> dict[str, object]:
        listener: dict[str, object] = {
            "port": port,
            "ip": self.placement.listen_host,
            "module": "mod_mqtt",
            # Debian's ejabberd.yml gives its MQTT listener a backlog of 1000 (ejabberd's own default is 5).
            "backlog": 4096 if self.config.tuned else 1000,
        }
        if self.config.tuned:
            listener["max_fsm_queue"] = 1000000
        if tls:
            listener["tls"] = True
        return listener

    def _settings(self, tls: TlsMaterial | None) -> dict[str, object]:
        """The whole config but the listeners, for the configured mode."""
        required: dict[str, object] = {
            "hosts": [HOST],
            "auth_method": ["anonymous"],
            "anonymous_protocol": "login_anon",
            "allow_multiple_connections": True,
        }
        if self.config.mode == "file":
            user = yaml.safe_load(self.config.user_text()) or {}
            if not isinstance(user, dict):
                raise BrokerError(f"ejabberd config file {self.config.file}: expected a YAML mapping")
            settings = {**required, **user}
            modules = dict(settings.get("modules") or {})
            modules.setdefault("mod_mqtt", {})  # the listener serves only hosts where it is loaded
            settings["modules"] = modules
        else:
            mod_mqtt: dict[str, object] = {}
            if self.config.tuned:
                mod_mqtt = {"max_queue": "unlimited", "max_topic_depth": "infinity",
                            "match_retained_limit": "infinity"}
            settings = {**required, "loglevel": "warning" if self.config.tuned else "info",
                        "modules": {"mod_mqtt": mod_mqtt}}
        if tls is not None:
            settings["certfiles"] = [*(settings.get("certfiles") or []), str(tls.cert_file), str(tls.key_file)]
            # ejabberd checks the certificate's chain at start-up and warns about an unknown issuer.
            settings.setdefault("ca_file", str(tls.ca_file))
        return settings

    def command(self, workdir: Path, ports: Ports, tls: TlsMaterial | None) -> list[str]:
        app, erl = self._app_file(), self._erl()
        if app is None or erl is None:
            raise BrokerError(f"ejabberd is not installed: {self.how_to_get}")
        settings = self._settings(tls)
        listen = [self._listener(ports.plain, tls=False)]
        if tls is not None and ports.tls is not None:
            listen.append(self._listener(ports.tls, tls=True))
        settings["listen"] = listen
        config = workdir / "ejabberd.yml"
        config.write_text("# written by mqttlab for one run\n" + yaml.safe_dump(settings, sort_keys=False))
        spool = workdir / "spool"
        logs = workdir / "logs"
        spool.mkdir(exist_ok=True)
        logs.mkdir(exist_ok=True)
        env = clean_environment("EJABBERD_")
        env.update({
            "HOME": str(workdir),
            "EJABBERD_CONFIG_PATH": str(config),
            "EJABBERD_LOG_PATH": str(logs / "ejabberd.log"),
            # the folder holding ejabberd-<version>/ and, through Erlang's own lib folder, its deps
            "ERL_LIBS": str(app.parent.parent.parent),
            "ERL_CRASH_DUMP": str(logs / "erl_crash.dump"),
            # ejabberdctl's values
            "ERL_MAX_PORTS": "32000",
            "ERL_MAX_ETS_TABLES": "1400",
        })
        self._env = env
        scheduler = ["+sbwt", "none", "+sbwtdcpu", "none", "+sbwtdio", "none"] if self.config.tuned else []
        return [
            erl, "-noinput",
            # ejabberdctl's VM flags: kernel poll, room for many processes, no crash dump
            "+K", "true", "+P", "250000", *scheduler,
            "-env", "ERL_CRASH_DUMP_BYTES", "0",
            "-mnesia", "dir", f'"{spool}"',
            "-s", "ejabberd",
        ]

    def environment(self) -> dict[str, str] | None:
        env = getattr(self, "_env", None)
        if env is None:
            raise BrokerError("ejabberd: command() must be called before environment()")
        return env
