package capi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/lossy"
	"github.com/multirail/multirail/lossy/discard"
)

// configKeys are the keys config_json may hold (multirail.h).
// "lossy_reliable" (never discard: the loss-tolerant allreduce is then
// exact) and "lossy_fixed_rate" (discard this fraction of packets whatever
// the controller says, [0, 1)) are the C ABI's additions for tests and
// baselines; "lossy_controller" sets the discard controller's constants
// on top of discard.Recommended (the match rule, as multirail train), in
// discard.ParseOptions' syntax ("rule=patent", "margin=1,window=50").
var configKeys = []string{"ifname", "emu", "scheduler", "timeout", "algorithms", "token", "insecure", "loopback_rails", "busy_poll", "lossy_reliable", "lossy_fixed_rate", "lossy_controller"}

// jsonObject decodes s (a JSON object, or "" for none) into a map of its
// keys, refusing keys outside allowed (the error names the key).
func jsonObject(what, s string, allowed []string) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if strings.TrimSpace(s) == "" {
		return m, nil
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object: %v", what, err)
	}
	if d.More() {
		return nil, fmt.Errorf("%s: more than one JSON value", what)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return nil, fmt.Errorf("%s: unknown key %q; allowed: %s", what, k, strings.Join(allowed, ", "))
		}
	}
	return m, nil
}

// field decodes m[key] into v (strictly: a string key wants a JSON
// string, and so on); a missing key or null leaves v alone.
func field(what string, m map[string]json.RawMessage, key string, v any) error {
	raw, ok := m[key]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%s: %q: %s is not a %s", what, key, raw, kind(v))
	}
	return nil
}

func kind(v any) string {
	switch v.(type) {
	case *string:
		return "string"
	case *bool:
		return "boolean"
	case *int:
		return "integer"
	case *float64:
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// ParseConfig reads config_json (multirail.h: "ifname", "emu",
// "scheduler", "timeout", "algorithms", "token", "insecure",
// "loopback_rails", "busy_poll"; "" means defaults) into a comm.Config.
// The error wraps comm.ErrConfig and names the bad key.
func ParseConfig(s string) (comm.Config, error) {
	var cfg comm.Config
	const what = "config_json"
	m, err := jsonObject(what, s, configKeys)
	if err != nil {
		return cfg, fmt.Errorf("%w: %w", comm.ErrConfig, err)
	}
	var timeout, algos, busy, ctrl string
	var rate float64
	for _, f := range []struct {
		key string
		v   any
	}{
		{"ifname", &cfg.IfName}, {"emu", &cfg.Emu}, {"scheduler", &cfg.Transport.Scheduler},
		{"timeout", &timeout}, {"algorithms", &algos}, {"token", &cfg.Transport.Token},
		{"insecure", &cfg.Transport.Insecure}, {"loopback_rails", &cfg.LoopbackRails}, {"busy_poll", &busy},
		{"lossy_reliable", &cfg.Stage.Reliable}, {"lossy_fixed_rate", &rate}, {"lossy_controller", &ctrl},
	} {
		if err := field(what, m, f.key, f.v); err != nil {
			return cfg, fmt.Errorf("%w: %w", comm.ErrConfig, err)
		}
	}
	if timeout != "" {
		d, err := time.ParseDuration(timeout)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("%w: %s: \"timeout\": %q; allowed: a positive duration such as \"90s\"", comm.ErrConfig, what, timeout)
		}
		cfg.Timeout = d
	}
	if busy != "" {
		d, err := time.ParseDuration(busy)
		if err != nil || d < 0 || d > multirail.MaxBusyPoll {
			return cfg, fmt.Errorf("%w: %s: \"busy_poll\": %q; allowed: a duration from \"0\" (never poll) to %q, such as \"200us\"", comm.ErrConfig, what, busy, multirail.MaxBusyPoll)
		}
		cfg.Transport.BusyPoll = d
		if d == 0 {
			cfg.Transport.BusyPoll = -1 // never
		}
	}
	if algos != "" {
		a, err := comm.ParseAlgorithms(algos)
		if err != nil {
			return cfg, fmt.Errorf("%s: \"algorithms\": %w", what, err)
		}
		cfg.Algorithms = a
	}
	if !(rate >= 0 && rate < 1) || rate > 0 && cfg.Stage.Reliable {
		return cfg, fmt.Errorf("%w: %s: \"lossy_fixed_rate\": %v; allowed: [0, 1), and 0 with \"lossy_reliable\"", comm.ErrConfig, what, rate)
	}
	cfg.Stage.FixedRate = rate
	if cfg.Stage.Discard, err = discard.ParseOptions(ctrl, discard.Recommended); err != nil {
		return cfg, fmt.Errorf("%w: %s: \"lossy_controller\": %w", comm.ErrConfig, what, err)
	}
	if cfg.LoopbackRails < 0 || cfg.LoopbackRails > multirail.MaxRails {
		return cfg, fmt.Errorf("%w: %s: \"loopback_rails\": %d; allowed: 1..%d (0: default)", comm.ErrConfig, what, cfg.LoopbackRails, multirail.MaxRails)
	}
	return cfg, nil
}

// lossyKeys are the keys of mr_lossy_allreduce's opts_json.
var lossyKeys = []string{"error_feedback", "packet_floats"}

// ParseLossyOpts reads opts_json of mr_lossy_allreduce ("" means
// defaults) into a lossy.Config. The error wraps comm.ErrConfig.
func ParseLossyOpts(s string) (lossy.Config, error) {
	var rc lossy.Config
	const what = "opts_json"
	m, err := jsonObject(what, s, lossyKeys)
	if err == nil {
		err = field(what, m, "error_feedback", &rc.ErrorFeedback)
	}
	if err == nil {
		err = field(what, m, "packet_floats", &rc.PacketFloats)
	}
	if err == nil && (rc.PacketFloats < 0 || rc.PacketFloats > 1<<20) {
		err = fmt.Errorf("%s: \"packet_floats\": %d; allowed: 1..1048576 (0: default %d)", what, rc.PacketFloats, lossy.DefaultPacketFloats)
	}
	if err != nil {
		return rc, fmt.Errorf("%w: %w", comm.ErrConfig, err)
	}
	return rc, nil
}
