package jobs

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Field is one payload field of a kind, read off its Go type.
type Field struct {
	Path     string // jsonpath: $.reviews, $.reviews[*].query
	Name     string // JSON name ("" for an array's element)
	Type     string // boolean, string, id, time, uuid, array, object
	Required bool   // top-level fields only
	Elem     string // an array's element type
}

var (
	timeType = reflect.TypeFor[time.Time]()
	uuidType = reflect.TypeFor[uuid.UUID]()
)

// Fields lists the payload fields of args' type, in declaration order, an
// array's element and an object's fields after it.
func Fields(args Args) []Field {
	return structFields(reflect.TypeOf(args), "$", true)
}

func structFields(t reflect.Type, prefix string, top bool) []Field {
	var out []Field
	for i := range t.NumField() {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("json"), ",")
		if !f.IsExported() || tag[0] == "-" || tag[0] == "" {
			continue
		}
		optional := false
		for _, o := range tag[1:] {
			optional = optional || o == "omitempty" || o == "omitzero"
		}
		required := top && (!optional || f.Tag.Get("job") == "required")
		out = append(out, typeFields(f.Type, prefix+"."+tag[0], tag[0], required)...)
	}
	return out
}

func typeFields(t reflect.Type, path, name string, required bool) []Field {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	f := Field{Path: path, Name: name, Required: required}
	switch {
	case t == timeType:
		f.Type = "time"
	case t == uuidType:
		f.Type = "uuid"
	case t.Kind() == reflect.Bool:
		f.Type = "boolean"
	case t.Kind() == reflect.String:
		f.Type = "string"
	case t.Kind() == reflect.Int64:
		f.Type = "id"
	case t.Kind() == reflect.Slice:
		f.Type = "array"
		elem := typeFields(t.Elem(), path+"[*]", "", false)
		f.Elem = elem[0].Type
		return append([]Field{f}, elem...)
	case t.Kind() == reflect.Struct:
		f.Type = "object"
		return append([]Field{f}, structFields(t, path, false)...)
	default:
		panic(fmt.Sprintf("jobs: payload field %s: no rule for Go type %s (add one to typeFields)", path, t))
	}
	return []Field{f}
}

const (
	timeRegex = `^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]` +
		`(\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`
	uuidRegex = `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`
)

// PayloadRule is the jsonpath predicate mneme.enqueue_job checks a kind's
// payload against: an object, each field of its type and range, the
// required ones present, and the kind's Rule. The jsonpath is lax: .type()
// does not unwrap arrays (so [5] is no id), a filter does (so the ranges
// are checked apart from the types), and a missing optional field matches
// nothing.
func (k Kind) PayloadRule() string {
	parts := []string{`$.type() == "object"`}
	for _, f := range Fields(k.Args) {
		if f.Required {
			parts = append(parts, fmt.Sprintf("exists(%s)", f.Path))
		}
		jt := f.Type
		switch f.Type {
		case "id":
			jt = "number"
		case "time", "uuid":
			jt = "string"
		}
		parts = append(parts, fmt.Sprintf(`!exists(%s.type() ? (@ != "%s"))`, f.Path, jt))
		switch f.Type {
		case "id":
			parts = append(parts, fmt.Sprintf("!exists(%s ? (@ < 1 || @ > 9223372036854775807 || @ != @.floor()))", f.Path))
		case "time":
			parts = append(parts, fmt.Sprintf(`!exists(%s ? (!(@ like_regex "%s")))`, f.Path, timeRegex))
		case "uuid":
			parts = append(parts, fmt.Sprintf(`!exists(%s ? (!(@ like_regex "%s" flag "i") || @ == "00000000-0000-0000-0000-000000000000"))`, f.Path, uuidRegex))
		}
	}
	if k.Rule != "" {
		parts = append(parts, k.Rule)
	}
	return strings.Join(parts, " && ")
}

// PayloadHint says the rule in words (mneme.job_kinds.payload_hint, the
// HINT of enqueue_job's error).
func (k Kind) PayloadHint() string {
	var parts []string
	for _, f := range Fields(k.Args) {
		t := f.Type
		switch t {
		case "id":
			t = "integer id (1 to 9223372036854775807)"
		case "time":
			t = "RFC 3339 time"
		}
		if !f.Required {
			t += " (optional)"
		}
		parts = append(parts, f.Path+": "+t)
	}
	if k.Hint != "" {
		parts = append(parts, k.Hint)
	}
	return strings.Join(parts, "; ")
}

// sqlType is the SQL type of a builder's argument for field f.
func sqlType(f Field) string {
	switch f.Type {
	case "boolean":
		return "boolean"
	case "string":
		return "text"
	case "id":
		return "bigint"
	case "time":
		return "timestamptz"
	case "uuid":
		return "uuid"
	case "array":
		switch f.Elem {
		case "id":
			return "bigint[]"
		case "string":
			return "text[]"
		case "uuid":
			return "uuid[]"
		}
	}
	return "jsonb" // an object, or an array of objects or arrays
}

// lines puts each condition of a rule on a line of its own (a jsonpath
// ignores the white space; mneme.job_kinds keeps it normalised).
func lines(rule, indent string) string { return strings.ReplaceAll(rule, " && ", " &&\n"+indent+" ") }

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// KindsSQL is sql/205-job-kinds.sql: the rows of mneme.job_kinds and one
// payload builder per kind, generated from Kinds.
func KindsSQL() string {
	var b strings.Builder
	b.WriteString(`-- Code generated from sidecar/jobs/kinds.go (jobs.Kinds) by
-- go test ./sidecar/jobs -run TestKindsSQL -update. DO NOT EDIT.
--
-- The job kinds the sidecar handles and the payload each handler reads (the
-- table is goose 00056's; its rows are written here, so a release that adds
-- a kind or changes a rule changes them on migrate), and one payload builder
-- per kind: every SQL site that enqueues a kind builds its payload with
-- mneme._<kind>_payload. Each rule is read off the fields of the kind's Go
-- type, each with its type and range: an id is a whole JSON number from 1 to
-- 2^63-1 (bigint), a uuid a uuid string, a time an RFC 3339 string, a flag a
-- boolean. A payload a rule lets through never fails its handler's
-- decoding, nor a cast in SQL that reads it.

WITH kinds (kind, needs_conversation, payload_rule, payload_hint, description) AS (VALUES
`)
	for i, k := range Kinds {
		sep := ","
		if i == len(Kinds)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    (%s, %t,\n     %s,\n     %s,\n     %s)%s\n", quote(k.Name()), k.NeedsConversation,
			quote(lines(k.PayloadRule(), "     ")), quote(k.PayloadHint()), quote(k.Description), sep)
	}
	b.WriteString(`), gone AS (  -- a kind no longer handled
    DELETE FROM mneme.job_kinds j WHERE j.kind NOT IN (SELECT kinds.kind FROM kinds)
)
INSERT INTO mneme.job_kinds AS k (kind, needs_conversation, payload_rule, payload_hint, description)
SELECT kinds.kind, kinds.needs_conversation, kinds.payload_rule::jsonpath, kinds.payload_hint, kinds.description FROM kinds
ON CONFLICT (kind) DO UPDATE SET needs_conversation = EXCLUDED.needs_conversation, payload_rule = EXCLUDED.payload_rule,
    payload_hint = EXCLUDED.payload_hint, description = EXCLUDED.description
WHERE (k.needs_conversation, k.payload_rule::text, k.payload_hint, k.description)
      IS DISTINCT FROM (EXCLUDED.needs_conversation, EXCLUDED.payload_rule::text, EXCLUDED.payload_hint, EXCLUDED.description);
`)
	for _, k := range Kinds {
		writeBuilder(&b, k)
	}
	return b.String()
}

// writeBuilder writes mneme._<kind>_payload: NULL for a required field is
// 22004, as is NULL in an array; an optional field given NULL is left out;
// the payload is then checked against the kind's Rule (RuleCode) and its
// whole rule (22023), so a builder never returns what enqueue_job refuses.
func writeBuilder(b *strings.Builder, k Kind) {
	fields := map[string]Field{}
	for _, f := range Fields(k.Args) {
		if f.Name != "" && strings.Count(f.Path, ".") == 1 {
			fields[f.Name] = f
		}
	}
	fn := "_" + k.Name() + "_payload"
	var params, types, entries, names []string
	stable := false
	for _, name := range k.Builder {
		f, ok := fields[name]
		if !ok {
			panic(fmt.Sprintf("jobs: kind %s: builder field %s is no top-level field of %T", k.Name(), name, k.Args))
		}
		params = append(params, fmt.Sprintf("%q %s", name, sqlType(f)))
		types = append(types, sqlType(f))
		entries = append(entries, fmt.Sprintf("(%s, to_jsonb(%s.%q))", quote(name), fn, name))
		names = append(names, name)
		stable = stable || f.Type == "time"
	}
	volatility := "IMMUTABLE"
	if stable {
		volatility = "STABLE" // a timestamptz is written in the session's time zone, as to_jsonb writes it
	}
	fmt.Fprintf(b, "\nCREATE OR REPLACE FUNCTION mneme.%s(%s)\nRETURNS jsonb\nLANGUAGE plpgsql %s\nSECURITY DEFINER\n"+
		"SET search_path = pg_catalog, pg_temp\nAS $$\n", fn, strings.Join(params, ", "), volatility)
	if len(entries) == 0 {
		b.WriteString("BEGIN\n    RETURN '{}'::jsonb;\nEND\n$$;\n")
	} else {
		b.WriteString("DECLARE\n    v_payload jsonb;\nBEGIN\n")
		for _, name := range k.Builder {
			f := fields[name]
			if f.Required {
				fmt.Fprintf(b, "    IF %s.%q IS NULL THEN\n        RAISE EXCEPTION '%s payload: %s must not be NULL' USING ERRCODE = '22004';\n    END IF;\n",
					fn, name, k.Name(), name)
			}
			if strings.HasSuffix(sqlType(f), "[]") {
				fmt.Fprintf(b, "    IF array_position(%s.%q, NULL) IS NOT NULL THEN\n        RAISE EXCEPTION '%s payload: %s must not hold NULL' USING ERRCODE = '22004';\n    END IF;\n",
					fn, name, k.Name(), name)
			}
		}
		fmt.Fprintf(b, "    SELECT coalesce(jsonb_object_agg(f.k, f.v), '{}'::jsonb) INTO v_payload\n    FROM (VALUES %s) AS f(k, v)\n    WHERE f.v IS NOT NULL;\n",
			strings.Join(entries, ",\n                 "))
		if k.Rule != "" {
			code := k.RuleCode
			if code == "" {
				code = "22023"
			}
			fmt.Fprintf(b, "    IF NOT jsonb_path_match(v_payload, %s) THEN\n        RAISE EXCEPTION '%s payload: %s' USING ERRCODE = '%s';\n    END IF;\n",
				quote(k.Rule), k.Name(), strings.ReplaceAll(k.Hint, "'", "''"), code)
		}
		fmt.Fprintf(b, "    IF NOT jsonb_path_match(v_payload, %s) THEN\n"+
			"        RAISE EXCEPTION '%s payload does not match its rule: %%', left(v_payload::text, 200)\n"+
			"            USING ERRCODE = '22023', HINT = %s;\n    END IF;\n    RETURN v_payload;\nEND\n$$;\n",
			quote(lines(k.PayloadRule(), "        ")), k.Name(), quote(k.PayloadHint()))
	}
	fmt.Fprintf(b, "COMMENT ON FUNCTION mneme.%s(%s) IS\n    %s;\n", fn, strings.Join(types, ", "),
		quote(fmt.Sprintf("Internal: a %s job's payload {%s} (Go: jobs.%s; generated from sidecar/jobs/kinds.go)%s.",
			k.Name(), strings.Join(names, ", "), reflect.TypeOf(k.Args).Name(), builderNote(len(names)))))
}

func builderNote(n int) string {
	if n == 0 {
		return "; the handler reads no field"
	}
	return "; an optional field given NULL is left out, the result is checked against the kind's rule"
}
