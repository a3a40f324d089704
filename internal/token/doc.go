// Package token finds the shared secret that both ends of a multirail
// connection (and the ranks of a communicator's rendezvous) prove they
// know: given explicitly, in the MULTIRAIL_TOKEN environment variable, or
// in the file MULTIRAIL_TOKEN_FILE names, which must not be readable by
// anyone but its owner. Generate makes a new one (what `multirail token`
// prints).
package token
