package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/python-docker-mcp/python-docker-mcp/config"
	"github.com/python-docker-mcp/python-docker-mcp/executor/dockertest"
)

// TestInstallDependencies: through the built server, install-package
// resolves dependencies two levels deep from the wheelhouse the test
// builds (pdma -> pdmb -> pdmc), installs them all and they import; a
// package whose dependency's dependency is blocked (pdmbad -> pdmmid ->
// pdmevil) is refused naming pdmevil and pdmmid, and nothing of it lands.
func TestInstallDependencies(t *testing.T) {
	cli := dockertest.RequireImage(t, config.Default().Docker.Image)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	dockertest.WriteWheelRequiring(t, dir, "pdma", "1.0", "1", "pdmb>=1")
	dockertest.WriteWheelRequiring(t, dir, "pdmb", "1.0", "10", "pdmc>=2")
	dockertest.WriteWheel(t, dir, "pdmc", "1.0", "99")
	dockertest.WriteWheel(t, dir, "pdmc", "2.0", "100")
	dockertest.WriteWheelRequiring(t, dir, "pdmbad", "1.0", "0", "pdmmid")
	dockertest.WriteWheelRequiring(t, dir, "pdmmid", "1.0", "0", "pdmevil")
	dockertest.WriteWheel(t, dir, "pdmevil", "1.0", "666")
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	yaml := "package:\n  find_links: [" + strconv.Quote(dir) + "]\n  blocked: [pdmevil]\npool:\n  enabled: false\n"
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c := stdioClient(t, "", []string{"--config", cfgFile})

	res := c.call(t, "execute-persistent", map[string]any{"code": "x = 1"})
	if res.IsError {
		t.Fatalf("create session: %q", text(res))
	}
	id, _ := structured(t, res)["session_id"].(string)

	t.Run("two levels of dependencies", func(t *testing.T) {
		res, prog := c.callWithProgress(t, "install-package", map[string]any{"package_name": "pdma", "session_id": id})
		out := structured(t, res)
		if res.IsError || out["status"] != "ok" || out["version"] != "1.0" {
			t.Fatalf("install pdma: %q\n%v", text(res), out)
		}
		var got []string
		for _, p := range out["packages"].([]any) {
			p := p.(map[string]any)
			by := []string{}
			for _, b := range p["required_by"].([]any) {
				by = append(by, b.(string))
			}
			got = append(got, p["name"].(string)+" "+p["version"].(string)+" <- "+strings.Join(by, ","))
		}
		slices.Sort(got)
		if want := []string{"pdma 1.0 <- ", "pdmb 1.0 <- pdma", "pdmc 2.0 <- pdmb"}; !slices.Equal(got, want) {
			t.Errorf("packages %q, want %q", got, want)
		}
		for _, m := range []string{"resolved pdma 1.0 (requested)", "resolved pdmb 1.0 (required by pdma)", "resolved pdmc 2.0 (required by pdmb)"} {
			if !slices.Contains(prog, m) {
				t.Errorf("progress %q lacks %q", prog, m)
			}
		}
		if !slices.ContainsFunc(prog, func(m string) bool {
			return strings.Contains(m, "Successfully installed") && strings.Contains(m, "pdmb-1.0") && strings.Contains(m, "pdmc-2.0")
		}) {
			t.Errorf("progress %q lacks pip's success line naming the dependencies", prog)
		}
		res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "import pdma, pdmb, pdmc\npdma.VALUE + pdmb.VALUE + pdmc.VALUE + x"})
		if res.IsError || !strings.Contains(text(res), "result: 112") {
			t.Errorf("import of the installed chain: %q, want result 112", text(res))
		}
	})

	t.Run("blocked dependency two levels down", func(t *testing.T) {
		res := c.call(t, "install-package", map[string]any{"package_name": "pdmbad", "session_id": id})
		out := structured(t, res)
		vs, _ := out["violations"].([]any)
		if !res.IsError || out["status"] != "denied" || len(vs) != 1 {
			t.Fatalf("install pdmbad: %q\n%v", text(res), out)
		}
		v := vs[0].(map[string]any)
		if v["rule"] != "packages.blocked" || !strings.Contains(v["msg"].(string), "dependency pdmevil 1.0 (required by pdmmid) is blocked") {
			t.Errorf("violation %v, want packages.blocked naming pdmevil and pdmmid", v)
		}
		if !strings.Contains(text(res), "pdmevil") || !strings.Contains(text(res), "pdmmid") {
			t.Errorf("text %q does not name the dependency and its requirer", text(res))
		}
		res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "import pdmbad"})
		if !strings.Contains(text(res), "ModuleNotFoundError") {
			t.Errorf("pdmbad importable after the refusal: %q", text(res))
		}
		res = c.call(t, "execute-persistent", map[string]any{"session_id": id, "code": "import pdmmid"})
		if !strings.Contains(text(res), "ModuleNotFoundError") {
			t.Errorf("pdmmid importable after the refusal: %q", text(res))
		}
	})

	c.cs.Close()
	waitNoSandboxes(t, cli, c.pid, "after the client closed")
	waitNoVolumes(t, cli, c.pid, "after the client closed")
}
