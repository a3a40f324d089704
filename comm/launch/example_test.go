package launch_test

import (
	"errors"
	"fmt"

	"github.com/multirail/multirail/comm/launch"
)

// Task 5 of `srun -N 4 -n 8` sees Slurm's variables; Detect finds its
// rank, its node's share of the tasks and rank 0's host from the
// compressed node list. In a program, pass os.LookupEnv and os.Hostname().
func ExampleDetect() {
	env := map[string]string{
		"SLURM_PROCID":              "5",
		"SLURM_NTASKS":              "8",
		"SLURM_LOCALID":             "1",
		"SLURM_NODEID":              "2",
		"SLURM_STEP_NODELIST":       "clh[0-3]",
		"SLURM_STEP_TASKS_PER_NODE": "2(x4)",
		"SLURM_JOB_ID":              "57",
		"SLURM_STEP_ID":             "2",
	}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	info, err := launch.Detect(getenv, "clh2")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s rank %d/%d, local %d/%d, job %s, rendezvous %s, serve %v\n",
		info.Launcher, info.Rank, info.Size, info.LocalRank, info.LocalSize, info.JobID, info.Rdzv, info.Serve)

	// Nothing launched this one.
	_, err = launch.Detect(func(string) (string, bool) { return "", false }, "vm")
	fmt.Println(errors.Is(err, launch.ErrNoLauncher))
	// Output:
	// slurm rank 5/8, local 1/2, job 57.2, rendezvous tcp://clh0:20785, serve false
	// true
}

func ExampleExpandHostList() {
	hosts, err := launch.ExpandHostList("gnode[01-04,7],b5")
	fmt.Println(hosts, err)
	// Output: [gnode01 gnode02 gnode03 gnode04 gnode7 b5] <nil>
}
