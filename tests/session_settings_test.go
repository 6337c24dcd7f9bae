package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryMnemeSettingIsListed: every mneme.* session setting the SQL
// layer reads or sets, and every mark its functions set or read, is named
// in docs/sql-api.md, "Who is writing: marks and session settings" (issue
// 49: trigger behaviour chosen through one documented mechanism, not ad-hoc
// settings).
func TestEveryMnemeSettingIsListed(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/sql-api.md")
	require.NoError(t, err)
	start := strings.Index(string(doc), "## Who is writing: marks and session settings")
	require.GreaterOrEqual(t, start, 0, "docs/sql-api.md has the section")
	section := string(doc)[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	files, err := filepath.Glob("../sql/*.sql")
	require.NoError(t, err)
	layer, err := filepath.Glob("../sql/citus/*.sql")
	require.NoError(t, err)
	files = append(files, layer...)
	settingRe := regexp.MustCompile(`(?:current_setting|set_config|_set_local)\('mneme\.([a-z_]*)'`)
	markRe := regexp.MustCompile(`mneme\._mark(?:ed)?\('([a-z_]+)'`)
	var settings, marks int
	for _, f := range files {
		body, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range settingRe.FindAllStringSubmatch(string(body), -1) {
			settings++
			name := "`mneme." + m[1] + "`"
			if m[1] == "" { // mneme.' || key: the marks on Citus
				name = "`mneme.<mark>`"
			}
			require.Contains(t, section, name, "%s: setting mneme.%s is not listed in docs/sql-api.md", f, m[1])
		}
		for _, m := range markRe.FindAllStringSubmatch(string(body), -1) {
			marks++
			require.Contains(t, section, "`"+m[1]+"`", "%s: mark %s is not listed in docs/sql-api.md", f, m[1])
		}
	}
	require.Greater(t, settings, 5)
	require.Greater(t, marks, 5)
}
