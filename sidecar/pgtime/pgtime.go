// Package pgtime lets the sidecar read every timestamptz PostgreSQL
// stores. PostgreSQL has 'infinity' and '-infinity' (and years to 294276);
// pgx refuses to scan the infinities into a time.Time ("cannot scan
// Infinity into *time.Time"), which made a page with such a row a 500 and
// a revise job over one fail (issue 47). Here they read as the latest and
// the earliest time the export format writes (Infinity, NegInfinity).
package pgtime

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

var (
	// Infinity is how 'infinity' reads: 9999-12-31T23:59:59.999999Z.
	Infinity = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	// NegInfinity is how '-infinity' reads: 0001-01-01T00:00:00Z.
	NegInfinity = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Finite scans a timestamptz into *T, the infinities as Infinity and
// NegInfinity (NULL is an error, as for a time.Time).
type Finite struct{ T *time.Time }

// ScanTimestamptz implements pgtype.TimestamptzScanner.
func (f Finite) ScanTimestamptz(v pgtype.Timestamptz) error {
	if !v.Valid {
		return fmt.Errorf("cannot scan NULL into *time.Time")
	}
	*f.T = finite(v)
	return nil
}

func finite(v pgtype.Timestamptz) time.Time {
	switch v.InfinityModifier {
	case pgtype.Infinity:
		return Infinity
	case pgtype.NegativeInfinity:
		return NegInfinity
	}
	return v.Time
}

// codec is pgx's timestamptz codec, but a *time.Time target reads the
// infinities as Infinity and NegInfinity.
type codec struct{ *pgtype.TimestamptzCodec }

func (c codec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*time.Time); ok {
		inner := c.TimestamptzCodec.PlanScan(m, oid, format, &pgtype.Timestamptz{})
		if inner != nil {
			return scanPlan{inner}
		}
	}
	return c.TimestamptzCodec.PlanScan(m, oid, format, target)
}

type scanPlan struct{ inner pgtype.ScanPlan }

func (p scanPlan) Scan(src []byte, target any) error {
	var v pgtype.Timestamptz
	if err := p.inner.Scan(src, &v); err != nil {
		return err
	}
	return Finite{target.(*time.Time)}.ScanTimestamptz(v)
}

// Register makes m read every timestamptz into a time.Time (once per type
// map: a map that has it already is left as it is).
func Register(m *pgtype.Map) {
	if t, ok := m.TypeForOID(pgtype.TimestamptzOID); ok {
		if _, done := t.Codec.(codec); done {
			return
		}
	}
	m.RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: codec{&pgtype.TimestamptzCodec{}}})
}
