// Package emu emulates network rails on one machine: real loopback TCP
// connections shaped in user space to a rate, a one-way delay and a
// background load that changes over time. It needs no root and no network.
//
// It has a pure core and a thin shell:
//
//   - Spec, ParseSpec and ParseSpecs read rail specs ("emu:200mbit/2ms",
//     "loop", "tcp:10.0.0.1>10.0.0.2"); ParseLoads reads background-load
//     steps ("0:0.5@4s,0:0@8s", the --load flag).
//   - Profile is the capacity of one rail direction over time; Bucket is a
//     token bucket over bytes that follows a Profile, with debt, so the
//     long-term rate is exact. Both take time as a time.Duration since an
//     epoch and do no I/O, start no goroutines and read no clock.
//   - Link is the shell: a proxy on 127.0.0.1:0 that forwards every
//     accepted connection to a target. In each direction a reader stamps
//     every chunk (at most 16 KiB) with its arrival and queues it; a writer
//     releases it when its own Bucket has paid for it (serialisation at the
//     link's rate) plus the one-way delay (propagation), like a real wire.
//     The queues are bounded (max(64 KiB, rate x (delay + 2 ms))) and the
//     kernel socket buffers small (max(32 KiB, 4 ms of the rate)), so
//     back-pressure reaches the sender and the sender's own queue reflects
//     the rail's speed. Pacing works on arrival times, not on when the
//     writer wakes up, so late timers cost no capacity: a late writer
//     catches up, and the long-term rate is the profile's.
//
// What the caller must do:
//
//   - Dial Link.Addr instead of the target, and Close the Link when done;
//     Close waits for all of its goroutines.
//   - Keep the load schedule's clock where the measurement starts: set
//     LinkConfig.Epoch or call Link.SetEpoch, and ask Link.Capacity what the
//     link offered over a measured interval.
//   - Expect the rate to be a long-term average: the bucket lets bursts of
//     up to LinkConfig.Burst bytes (default max(16 KiB, 1 ms of the rate))
//     through, and the proxy writes in chunks of at most 16 KiB.
//   - Note the units: rates are bits per second and decimal; "mbps" means
//     megabits per second here (a synonym of "mbit"), not megabytes as in tc.
//     Rates and delays in specs follow package units (units.ParseRate,
//     units.ParseDuration), like the rest of multirail.
package emu
