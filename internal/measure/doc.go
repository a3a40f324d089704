// Package measure holds the statistics that multirail's benchmarks and
// simulator report, with one definition each, so that figures from the
// simulator, the emulated benchmarks and the lab agree on what they mean:
//
//   - Percentile: the nearest-rank percentile. The q-quantile of n values
//     is the ceil(q*n)-th smallest (1-based), clamped to the first and the
//     last value: no interpolation, always one of the values. p50 of
//     1, 2, 3, 4 is 2; p99 of 100 values is the 99th smallest.
//   - Summarize: count, arithmetic mean (the sum in the order given,
//     divided by the count), minimum and maximum.
//   - Rates, WindowRate, CumulativeRates: goodput in bits per second from
//     bytes counted per fixed time bin, or from cumulative byte counters
//     sampled at arbitrary times.
//
// Empty inputs give zeros, not NaN, so results stay JSON-encodable.
// Functions do not modify their arguments.
package measure
