package discard

import (
	"fmt"
	"strconv"
	"strings"
)

// OptionKeys lists the keys ParseOptions accepts, with the field each sets.
var OptionKeys = []string{"initial (Initial)", "up (Up)", "down (Down)", "th1 (QualityThreshold)", "th2 (DelayThreshold)", "max (Max)", "k (History)", "pending (Pending)", "raw (RawPeriod)", "rule (Rule: patent or match)", "window (Window)", "margin (Margin)", "ramp (Ramp)", "rise (Rise)", "cap (CalmCap)", "share (Share)"}

// ParseOptions sets fields of c from a comma-separated list of key=value
// pairs (see OptionKeys), e.g. "up=0.2,down=0.02,k=4", and validates the
// result. The empty string returns c unchanged (validated).
func ParseOptions(s string, c Config) (Config, error) {
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return c, fmt.Errorf("%w: %q: want key=value with key one of %s", ErrConfig, kv, strings.Join(OptionKeys, ", "))
		}
		k = strings.ToLower(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		var err error
		switch k {
		case "k", "pending", "window":
			var n int
			if n, err = strconv.Atoi(v); err == nil {
				switch k {
				case "k":
					c.History = n
				case "pending":
					c.Pending = n
				default:
					c.Window = n
				}
			}
		case "rule":
			c.Rule = strings.ToLower(v)
		case "raw":
			c.RawPeriod, err = strconv.ParseBool(v)
		case "initial", "up", "down", "th1", "th2", "max", "margin", "ramp", "rise", "cap", "share":
			var f float64
			if f, err = strconv.ParseFloat(v, 64); err == nil {
				*map[string]*float64{"initial": &c.Initial, "up": &c.Up, "down": &c.Down,
					"th1": &c.QualityThreshold, "th2": &c.DelayThreshold, "max": &c.Max, "margin": &c.Margin,
					"ramp": &c.Ramp, "rise": &c.Rise, "cap": &c.CalmCap, "share": &c.Share}[k] = f
			}
		default:
			return c, fmt.Errorf("%w: unknown key %q; allowed: %s", ErrConfig, k, strings.Join(OptionKeys, ", "))
		}
		if err != nil {
			return c, fmt.Errorf("%w: %s=%q: not a valid value", ErrConfig, k, v)
		}
	}
	return c.Validate()
}
