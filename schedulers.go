package multirail

// The learning schedulers register themselves in the sched registry.
import _ "github.com/multirail/multirail/sched/qlearn"
