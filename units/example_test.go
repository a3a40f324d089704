package units_test

import (
	"errors"
	"fmt"

	"github.com/multirail/multirail/units"
)

func ExampleParseRate() {
	for _, s := range []string{"200mbit", "1.5Gbit/s", "64kbps", "2e8", "10 mbit"} {
		bps, err := units.ParseRate(s)
		fmt.Println(s, bps, err)
	}
	// Output:
	// 200mbit 2e+08 <nil>
	// 1.5Gbit/s 1.5e+09 <nil>
	// 64kbps 64000 <nil>
	// 2e8 2e+08 <nil>
	// 10 mbit 1e+07 <nil>
}

func ExampleParseSize() {
	for _, s := range []string{"65536", "64KiB", "64kib", "4m", "1MB"} {
		n, err := units.ParseSize(s)
		fmt.Println(s, n, err)
	}
	// Output:
	// 65536 65536 <nil>
	// 64KiB 65536 <nil>
	// 64kib 65536 <nil>
	// 4m 4194304 <nil>
	// 1MB 1000000 <nil>
}

func ExampleParseDuration() {
	for _, s := range []string{"4ms", "1m30s", "250us", "2.5"} {
		d, err := units.ParseDuration(s)
		fmt.Println(s, d, err)
	}
	// Output:
	// 4ms 4ms <nil>
	// 1m30s 1m30s <nil>
	// 250us 250µs <nil>
	// 2.5 2.5s <nil>
}

// Errors name the value and the allowed forms, and tell a malformed value
// (ErrSyntax) from one out of range (ErrRange).
func ExampleError() {
	_, err := units.ParseSize("1.5MiB")
	fmt.Println(errors.Is(err, units.ErrSyntax), errors.Is(err, units.ErrRange))
	_, err = units.ParseDuration("-4ms")
	fmt.Println(errors.Is(err, units.ErrSyntax), errors.Is(err, units.ErrRange))
	var ue *units.Error
	if errors.As(err, &ue) {
		fmt.Println(ue.Quantity, ue.Value, ue.Reason)
	}
	// Output:
	// true false
	// false true
	// duration -4ms negative
}

func ExampleFormatRate() {
	fmt.Println(units.FormatRate(2e8), units.FormatRate(1.5e9), units.FormatRate(64e3), units.FormatRate(123))
	// Output: 200mbit 1.5gbit 64kbit 123bit
}

func ExampleFormatSize() {
	fmt.Println(units.FormatSize(65536), units.FormatSize(4<<20), units.FormatSize(1000))
	// Output: 64KiB 4MiB 1000B
}

func ExampleFormatDuration() {
	fmt.Println(units.FormatDuration(2e6), units.FormatDuration(1500e3), units.FormatDuration(3e9))
	// Output: 2ms 1500us 3s
}
