//go:build !mochi_v23

// Mochi v2.6 and later: log/slog logging, listeners configured by listeners.Config, and JSON
// names on Options and Capabilities (the names of Mochi's own config file).
package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
)

func newBroker(cfg *runConfig) (broker, error) {
	// Decoding onto the defaults changes only the settings the file names.
	options := &mqtt.Options{Capabilities: mqtt.NewDefaultServerCapabilities()}
	if err := decodeStrict(cfg.Options, options); err != nil {
		return nil, err
	}
	if len(options.Listeners) > 0 || len(options.Hooks) > 0 {
		return nil, fmt.Errorf("options: listeners and hooks are mqttlab's, not the file's")
	}
	if cfg.Logging.Level != "" {
		var level slog.Level
		if err := level.UnmarshalText([]byte(cfg.Logging.Level)); err != nil {
			return nil, fmt.Errorf("logging.level: %w", err)
		}
		options.Logger = slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: level}))
	}
	return newServer(options, cfg)
}

// newTCP: v2.6 and later take everything in the listener's config.
func newTCP(l listenerConfig, tlsCfg *tls.Config) listeners.Listener {
	return listeners.NewTCP(listeners.Config{Type: listeners.TypeTCP, ID: l.ID, Address: l.Address, TLSConfig: tlsCfg})
}
