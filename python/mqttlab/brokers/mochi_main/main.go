// Command mochi-main runs Mochi MQTT (a Go library without a broker binary of its own that we
// could pin) for mqttlab: it reads one JSON file that mqttlab writes per run, starts the
// listeners named there with anonymous access, and stops cleanly on SIGTERM or SIGINT.
//
// The file mirrors the sections of Mochi's own config format, so that a user's `options` and
// `logging` can be passed through unchanged; the listeners are always mqttlab's:
//
//	{"listeners": [{"id": "plain", "address": "127.0.0.1:1883"},
//	               {"id": "tls", "address": "127.0.0.1:8883", "cert_file": "...", "key_file": "..."}],
//	 "logging": {"level": "WARN"},
//	 "options": {"capabilities": {"maximum_inflight": 65535}}}
package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
)

const mochiModule = "github.com/mochi-mqtt/server/v2"

type listenerConfig struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
}

type runConfig struct {
	Listeners []listenerConfig `json:"listeners"`
	Logging   struct {
		// Empty keeps Mochi's own logger (INFO, text, stdout): the as-shipped behaviour.
		Level string `json:"level"`
	} `json:"logging"`
	// Passed to the Mochi-version-specific code, which decodes it strictly so that a
	// misspelt setting is an error rather than silently ignored.
	Options json.RawMessage `json:"options"`
}

// broker is the part of Mochi's API that differs between its releases (see server_*.go).
type broker interface {
	Serve() error
	Close() error
}

// newServer is what every release shares: anonymous access and the run's listeners, each a TCP
// listener made the release's own way (newTCP in server_*.go).
func newServer(options *mqtt.Options, cfg *runConfig) (broker, error) {
	server := mqtt.New(options)
	if err := server.AddHook(new(auth.AllowHook), nil); err != nil {
		return nil, err
	}
	for _, l := range cfg.Listeners {
		tlsCfg, err := tlsConfig(l)
		if err != nil {
			return nil, err
		}
		if err := server.AddListener(newTCP(l, tlsCfg)); err != nil {
			return nil, fmt.Errorf("listener %s on %s: %w", l.ID, l.Address, err)
		}
	}
	return server, nil
}

func mochiVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == mochiModule {
			if dep.Replace != nil {
				return dep.Replace.Version
			}
			return dep.Version
		}
	}
	return "unknown"
}

func readConfig(path string) (*runConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.DisallowUnknownFields()
	cfg := new(runConfig)
	if err := decoder.Decode(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(cfg.Listeners) == 0 {
		return nil, fmt.Errorf("%s: no listeners", path)
	}
	return cfg, nil
}

// decodeStrict fills `into` from `raw` (if any), refusing fields `into` does not have.
func decodeStrict(raw json.RawMessage, into any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(into); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	return nil
}

func tlsConfig(l listenerConfig) (*tls.Config, error) {
	if l.CertFile == "" && l.KeyFile == "" {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(l.CertFile, l.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", l.ID, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

func main() {
	if len(os.Args) == 2 && strings.TrimLeft(os.Args[1], "-") == "version" {
		fmt.Printf("mochi %s\n", strings.TrimPrefix(mochiVersion(), "v"))
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mochi-main CONFIG.json | --version")
		os.Exit(2)
	}
	cfg, err := readConfig(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "mochi-main:", err)
		os.Exit(2)
	}
	// Registered before the listeners open, so that a stop requested during start-up is not lost.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)

	server, err := newBroker(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mochi-main:", err)
		os.Exit(1)
	}
	if err := server.Serve(); err != nil {
		fmt.Fprintln(os.Stderr, "mochi-main: serve:", err)
		os.Exit(1)
	}
	<-stop
	_ = server.Close()
}
