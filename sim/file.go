package sim

import (
	"fmt"
	"os"
	"path/filepath"
)

// LoadScenario reads and parses the scenario file at path (YAML or JSON),
// and the trace files its loads name, relative to the scenario file's
// directory. Errors have the form "FILE:LINE: reason". This is the only
// function of the package that does I/O.
func LoadScenario(path string) (*Scenario, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxFileBytes {
		return nil, fmt.Errorf("%s:1: %w", path, &lineError{fmt.Sprintf("file is larger than %d bytes", maxFileBytes)})
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	read := func(file string) (string, []byte, error) {
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		st, err := os.Stat(file)
		if err != nil {
			return file, nil, err
		}
		if st.Size() > maxFileBytes {
			return file, nil, fmt.Errorf("trace file %s is larger than %d bytes", file, maxFileBytes)
		}
		b, err := os.ReadFile(file)
		return file, b, err
	}
	return parseScenario(path, data, read)
}
