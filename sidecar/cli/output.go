package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Report prints a benchmark's or an evaluation's result on stdout, as
// indented JSON or as its table, after writing its plot to the file plot
// when one is named.
func Report(res any, asJSON bool, plot string, svg, table func(io.Writer) error) error {
	if plot != "" {
		if err := WriteFile(plot, svg); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return table(os.Stdout)
}

// WriteFile creates path and writes it with write.
func WriteFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
