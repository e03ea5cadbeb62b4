package main

import (
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// TestDataFrameShowsAsATable drives the built server over stdio: a
// DataFrame as a cell's last expression comes back as its text table, a
// display() call prints one on stdout, and input() fails saying why.
func TestDataFrameShowsAsATable(t *testing.T) {
	dockertest.RequireImage(t, config.Default().Docker.Image)
	c := stdioClient(t, "", nil)
	const code = "import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3, 19]})\ndisplay(df.temp)\ndf"
	res := c.call(t, "execute-transient", map[string]any{"code": code})
	sc := structured(t, res)
	result, _ := sc["result"].(string)
	if res.IsError || sc["status"] != "ok" || !strings.Contains(result, "city  temp") || !strings.Contains(result, "1  Lima    19") {
		t.Fatalf("a DataFrame as the last expression: status %v, result %q; want ok and its table\n%s", sc["status"], result, text(res))
	}
	if out := text(res); !strings.Contains(out, "--- stdout ---\n0     3\n1    19\nName: temp, dtype: int64") {
		t.Errorf("display(series): want the Series' table on stdout\n%s", out)
	}
	res = c.call(t, "execute-transient", map[string]any{"code": "name = input('name? ')"})
	if !strings.Contains(text(res), "input() is not available") {
		t.Errorf("input(): want the error saying it is not available\n%s", text(res))
	}
}
