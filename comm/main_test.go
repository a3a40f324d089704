package comm

import (
	"os"
	"testing"

	"github.com/multirail/multirail"
	"go.uber.org/goleak"
)

// TestMain allows short tokens (multirail.InsecureEnv), which the tests
// use, in this process and the ranks it starts, and checks that no test
// leaves a goroutine behind.
func TestMain(m *testing.M) {
	os.Setenv(multirail.InsecureEnv, "1")
	goleak.VerifyTestMain(m)
}
