// Package bench measures multirail connections over emulated or loopback
// rails inside one process: both endpoints, the emulated links and a plain
// TCP baseline, side by side in the same run. It backs `multirail bench`
// and `multirail demo`.
package bench
