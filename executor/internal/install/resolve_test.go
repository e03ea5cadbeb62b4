package install

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolverLines(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lines   []string
		want    []Resolved
		wantErr string
	}{
		{name: "chain", lines: []string{
			`pdm-resolved {"name": "pdma", "version": "1.0", "required_by": []}`,
			`pdm-resolved {"name": "pdmb", "version": "1.0", "required_by": ["pdma"]}`,
			`pdm-resolved-count 2`,
		}, want: []Resolved{{Name: "pdma", Version: "1.0", RequiredBy: []string{}}, {Name: "pdmb", Version: "1.0", RequiredBy: []string{"pdma"}}}},
		{name: "nothing to install", lines: []string{"pdm-resolved-count 0", "pdm-satisfied 2.2.4"}, want: nil},
		{name: "a line lost", lines: []string{`pdm-resolved {"name": "pdma", "version": "1.0"}`, "pdm-resolved-count 2"}, wantErr: "announced 2 packages and listed 1"},
		{name: "no count", lines: []string{`pdm-resolved {"name": "pdma", "version": "1.0"}`}, wantErr: "no package count"},
		{name: "not json", lines: []string{`pdm-resolved {`, "pdm-resolved-count 1"}, wantErr: "unreadable"},
		{name: "a name that is an option", lines: []string{`pdm-resolved {"name": "--index-url=http://x", "version": "1"}`, "pdm-resolved-count 1"}, wantErr: "not a package name"},
		{name: "a version with a space", lines: []string{`pdm-resolved {"name": "pdma", "version": "1 --pre"}`, "pdm-resolved-count 1"}, wantErr: "not a version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &resolverLines{count: -1}
			for _, line := range tc.lines {
				if !l.take(line) {
					t.Fatalf("take(%q) = false", line)
				}
			}
			if l.take("Processing /wheelhouse/0/pdma-1.0-py3-none-any.whl") {
				t.Error("an output line was taken as data")
			}
			got, err := l.result()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("result() = %v, %v; want an error about %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("result() (-want +got):\n%s", diff)
			}
		})
	}
}
