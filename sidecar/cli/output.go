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

// Result prints a bench's result as one JSON object or as its table.
func Result(asJSON bool, res any, table func(io.Writer)) error {
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	table(os.Stdout)
	return nil
}

// Results prints one JSON object per result, or their table.
func Results[T any](asJSON bool, results []T, table func(io.Writer)) error {
	if !asJSON {
		table(os.Stdout)
		return nil
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
