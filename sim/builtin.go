package sim

import (
	"fmt"
	"slices"
	"strings"
)

// builtins are the built-in scenarios, in the scenario file format.
var builtins = map[string]string{
	"static-hetero": `
# Three rails of different rates, no background load: how well does each
# scheduler fill heterogeneous rails?
name: static-hetero
duration: 10s
rails:
  - {name: a, rate: 200mbit, delay: 1ms}
  - {name: b, rate: 100mbit, delay: 1ms}
  - {name: c, rate: 50mbit, delay: 1ms}
traffic: {kind: bulk, size: 1MiB, window: 8}
`,
	"step-shift": `
# Background load moves between rails: half of rail a is taken at 4 s; at
# 8 s rail a recovers and rail b loses 60 %.
name: step-shift
duration: 12s
rails:
  - name: a
    rate: 200mbit
    delay: 1ms
    load:
      - {kind: step, at: 4s, fraction: 0.5}
      - {kind: step, at: 8s, fraction: 0}
  - name: b
    rate: 100mbit
    delay: 1ms
    load:
      - {kind: step, at: 8s, fraction: 0.6}
  - {name: c, rate: 50mbit, delay: 1ms}
traffic: {kind: bulk, size: 1MiB, window: 8}
`,
	"flapping": `
# The fastest rail flaps: from 1 s on, every 2 s it loses 90 % of its
# capacity for 1 s.
name: flapping
duration: 10s
rails:
  - name: a
    rate: 200mbit
    delay: 1ms
    load:
      - {kind: onoff, start: 1s, period: 2s, duty: 0.5, fraction: 0.9}
  - {name: b, rate: 100mbit, delay: 1ms}
  - {name: c, rate: 50mbit, delay: 1ms}
traffic: {kind: bulk, size: 1MiB, window: 8}
`,
	"recovery": `
# Light traffic (30 % of the rails' total rate, mostly small messages) while
# the fast rail is 95 % taken; at 3 s it is given back. Schedulers that
# learn rates only from backlogged rails keep avoiding it.
name: recovery
duration: 10s
rails:
  - name: a
    rate: 200mbit
    delay: 1ms
    load:
      - {kind: step, at: 0s, fraction: 0.95}
      - {kind: step, at: 3s, fraction: 0}
  - {name: b, rate: 100mbit, delay: 1ms}
traffic:
  kind: mixed
  sizes:
    - {size: 4KiB, weight: 8}
    - {size: 256KiB, weight: 2}
  load: 0.3
`,
	"many-rails": `
# Eight rails of diverse rates and delays; three of them see random bursts
# of background load.
name: many-rails
duration: 10s
rails:
  - name: r400
    rate: 400mbit
    delay: 1ms
    load: [{kind: poisson, gap: 2s, length: 500ms, fraction: 0.7}]
  - {name: r200a, rate: 200mbit, delay: 1ms}
  - name: r200b
    rate: 200mbit
    delay: 2ms
    load: [{kind: poisson, gap: 1s, length: 300ms, fraction: 0.5}]
  - {name: r100a, rate: 100mbit, delay: 2ms}
  - {name: r100b, rate: 100mbit, delay: 5ms}
  - name: r50a
    rate: 50mbit
    delay: 5ms
    load: [{kind: poisson, gap: 500ms, length: 200ms, fraction: 0.9}]
  - {name: r50b, rate: 50mbit, delay: 10ms}
  - {name: r25, rate: 25mbit, delay: 10ms}
traffic: {kind: bulk, size: 4MiB, window: 8}
`,
	"allreduce-64": `
# Ring allreduce among 64 ranks with 1 MiB chunks (16 segments each), so
# that a chunk is striped over the rank's rails: 2 to 4 rails drawn from
# the template, rates scaled by a factor in [0.5, 1.5], random bursts of
# background load on rails a and c. Three allreduces, back to back.
name: allreduce-64
duration: 60s
rails:
  - name: a
    rate: 10gbit
    delay: 10us
    load: [{kind: poisson, gap: 50ms, length: 10ms, fraction: 0.8}]
  - {name: b, rate: 10gbit, delay: 10us}
  - name: c
    rate: 4gbit
    delay: 20us
    load: [{kind: poisson, gap: 20ms, length: 5ms, fraction: 0.5}]
  - {name: d, rate: 1gbit, delay: 50us}
traffic:
  kind: allreduce
  ranks: 64
  size: 64MiB
  iterations: 3
  rails_min: 2
  rails_max: 4
  rate_jitter: 0.5
`,
	"allreduce-1024": `
# Ring allreduce among 1024 ranks. Each rank sends to its successor over
# 2 to 4 rails drawn from the template below, each rate scaled by a factor
# in [0.5, 1.5]; rails a and c see random bursts of background load, drawn
# per rank. The vector is 1024 x 64 KiB, so each chunk is one segment.
name: allreduce-1024
duration: 60s
rails:
  - name: a
    rate: 10gbit
    delay: 10us
    load: [{kind: poisson, gap: 50ms, length: 10ms, fraction: 0.8}]
  - {name: b, rate: 10gbit, delay: 10us}
  - name: c
    rate: 4gbit
    delay: 20us
    load: [{kind: poisson, gap: 20ms, length: 5ms, fraction: 0.5}]
  - {name: d, rate: 1gbit, delay: 50us}
traffic:
  kind: allreduce
  ranks: 1024
  size: 64MiB
  iterations: 1
  rails_min: 2
  rails_max: 4
  rate_jitter: 0.5
`,
}

// BuiltinNames lists the built-in scenarios in sorted order.
func BuiltinNames() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Builtin returns a fresh copy of the built-in scenario name.
func Builtin(name string) (*Scenario, error) {
	src, ok := builtins[name]
	if !ok {
		return nil, fmt.Errorf("%w: no built-in scenario %q (built-ins: %s)", ErrScenario, name, strings.Join(BuiltinNames(), ", "))
	}
	return ParseScenario("builtin:"+name, []byte(src))
}

// BuiltinSource returns the scenario file text of the built-in scenario
// name, "" if there is none.
func BuiltinSource(name string) string { return strings.TrimPrefix(builtins[name], "\n") }

// Describe returns the first comment lines of a built-in scenario, joined
// into one line.
func Describe(name string) string {
	var parts []string
	for _, l := range strings.Split(strings.TrimSpace(builtins[name]), "\n") {
		if !strings.HasPrefix(l, "#") {
			break
		}
		parts = append(parts, strings.TrimSpace(strings.TrimPrefix(l, "#")))
	}
	return strings.Join(parts, " ")
}
