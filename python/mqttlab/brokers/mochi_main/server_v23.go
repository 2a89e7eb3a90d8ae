//go:build mochi_v23

// Mochi v2.3, the newest release that builds with Go 1.19 (Debian 12's Go): zerolog logging,
// positional listener arguments, and no JSON names on its Capabilities, which are therefore
// mapped here by hand (v2.3 has no maximum_inflight: its in-flight store is bounded only by the
// 65535 packet identifiers).
package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/rs/zerolog"
)

type capabilitiesV23 struct {
	MaximumMessageExpiryInterval *int64  `json:"maximum_message_expiry_interval"`
	MaximumClientWritesPending   *int32  `json:"maximum_client_writes_pending"`
	MaximumSessionExpiryInterval *uint32 `json:"maximum_session_expiry_interval"`
	MaximumPacketSize            *uint32 `json:"maximum_packet_size"`
	ReceiveMaximum               *uint16 `json:"receive_maximum"`
	TopicAliasMaximum            *uint16 `json:"topic_alias_maximum"`
	SharedSubAvailable           *byte   `json:"shared_sub_available"`
	MinimumProtocolVersion       *byte   `json:"minimum_protocol_version"`
	MaximumQos                   *byte   `json:"maximum_qos"`
	RetainAvailable              *byte   `json:"retain_available"`
	WildcardSubAvailable         *byte   `json:"wildcard_sub_available"`
	SubIDAvailable               *byte   `json:"sub_id_available"`
	// Accepted so that one config serves every release; v2.3 has no such limit to set.
	MaximumInflight *uint16 `json:"maximum_inflight"`
}

type optionsV23 struct {
	Capabilities             capabilitiesV23 `json:"capabilities"`
	ClientNetWriteBufferSize int             `json:"client_net_write_buffer_size"`
	ClientNetReadBufferSize  int             `json:"client_net_read_buffer_size"`
	SysTopicResendInterval   int64           `json:"sys_topic_resend_interval"`
}

func set[T any](target *T, value *T) {
	if value != nil {
		*target = *value
	}
}

func newBroker(cfg *runConfig) (broker, error) {
	var given optionsV23
	if err := decodeStrict(cfg.Options, &given); err != nil {
		return nil, err
	}
	// A copy: v2.3 hands out its defaults as one shared value.
	defaults := *mqtt.DefaultServerCapabilities
	caps := &defaults
	c := given.Capabilities
	set(&caps.MaximumMessageExpiryInterval, c.MaximumMessageExpiryInterval)
	set(&caps.MaximumClientWritesPending, c.MaximumClientWritesPending)
	set(&caps.MaximumSessionExpiryInterval, c.MaximumSessionExpiryInterval)
	set(&caps.MaximumPacketSize, c.MaximumPacketSize)
	set(&caps.ReceiveMaximum, c.ReceiveMaximum)
	set(&caps.TopicAliasMaximum, c.TopicAliasMaximum)
	set(&caps.SharedSubAvailable, c.SharedSubAvailable)
	set(&caps.MinimumProtocolVersion, c.MinimumProtocolVersion)
	set(&caps.MaximumQos, c.MaximumQos)
	set(&caps.RetainAvailable, c.RetainAvailable)
	set(&caps.WildcardSubAvailable, c.WildcardSubAvailable)
	set(&caps.SubIDAvailable, c.SubIDAvailable)
	options := &mqtt.Options{
		Capabilities:             caps,
		ClientNetWriteBufferSize: given.ClientNetWriteBufferSize,
		ClientNetReadBufferSize:  given.ClientNetReadBufferSize,
		SysTopicResendInterval:   given.SysTopicResendInterval,
	}
	if cfg.Logging.Level != "" {
		level, err := zerolog.ParseLevel(strings.ToLower(cfg.Logging.Level))
		if err != nil {
			return nil, fmt.Errorf("logging.level: %w", err)
		}
		logger := zerolog.New(os.Stdout).Level(level).With().Timestamp().Logger()
		options.Logger = &logger
	}
	return newServer(options, cfg)
}

// newTCP: v2.3 takes the listener's id and address apart from its config.
func newTCP(l listenerConfig, tlsCfg *tls.Config) listeners.Listener {
	return listeners.NewTCP(l.ID, l.Address, &listeners.Config{TLSConfig: tlsCfg})
}
