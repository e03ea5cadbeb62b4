package docker

import (
	"strings"
	"testing"
)

func TestContainerInMount(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for line, want := range map[string]string{
		"103 84 254:0 /var/lib/docker/containers/" + id + "/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw":          id,
		"102 84 254:0 /home/u/.local/share/docker/containers/" + id + "/resolv.conf /etc/resolv.conf rw - ext4 /dev/vda rw": id,
		// A Docker host lists other containers' shm mounts: not its own container.
		"590 29 0:52 / /var/lib/docker/containers/" + id + "/mounts/shm rw,nosuid - tmpfs shm rw": "",
		"30 1 254:0 / / rw,relatime - ext4 /dev/vda rw":                                           "",
		"short": "",
	} {
		got := ""
		if m := containerInMount(line); m != nil {
			got = m[1]
		}
		if got != want {
			t.Errorf("containerInMount(%q) = %q, want %q", line, got, want)
		}
	}
}
