package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/moby/moby/client"

	"github.com/python-docker-mcp/python-docker-mcp/executor/docker"
)

// DefaultServerImage is the tag `image build-server` gives the server image.
const DefaultServerImage = "python-docker-mcp-server:latest"

// caBundles are where Linux distributions keep the CA bundle the server
// image copies (for auth.jwks_uri over https).
var caBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",             // openSUSE
}

// runBuildServer serves `image build-server [--tag T]`: it imports an
// image holding only this (static) binary, a CA bundle and an empty /tmp
// and /root, with the binary as its entrypoint. No registry and no base
// image are involved.
func runBuildServer(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("image build-server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tag := fs.String("tag", DefaultServerImage, "image name:tag")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError(stderr, fmt.Errorf("image build-server: want `image build-server [--tag NAME:TAG]`"))
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "python-docker-mcp: image build-server: cannot find this binary:", err)
		return exitFail
	}
	if err := checkStatic(exe); err != nil {
		fmt.Fprintf(stderr, "python-docker-mcp: image build-server: %v\n", err)
		return exitFail
	}
	layer, err := serverRoot(exe)
	if err != nil {
		fmt.Fprintln(stderr, "python-docker-mcp: image build-server:", err)
		return exitFail
	}
	cli, err := docker.Connect(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "python-docker-mcp:", err)
		return exitDocker
	}
	defer cli.Close()
	start := time.Now()
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: bytes.NewReader(layer), SourceName: "-"}, *tag, client.ImageImportOptions{
		Message: "python-docker-mcp server " + version,
		Changes: serverImageChanges(),
	})
	if err == nil {
		_, err = io.Copy(io.Discard, res)
		res.Close()
	}
	if err != nil {
		fmt.Fprintf(stderr, "python-docker-mcp: image build-server: docker image import %s: %v\n", *tag, err)
		return exitDocker
	}
	fmt.Fprintf(stdout, "built %s (%d MB) in %s\nrun it: docker run -i --rm -v /var/run/docker.sock:/var/run/docker.sock %s\n",
		*tag, len(layer)>>20, time.Since(start).Round(time.Millisecond), *tag)
	return exitOK
}

// serverImageChanges are the Dockerfile instructions of the server image.
func serverImageChanges() []string {
	return []string{
		`ENTRYPOINT ["/python-docker-mcp"]`,
		"ENV HOME=/root",
		"ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		"WORKDIR /root",
		"LABEL org.opencontainers.image.title=python-docker-mcp",
		"LABEL org.opencontainers.image.version=" + version,
	}
}

// checkStatic refuses a dynamically linked binary: the image has no libc.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not a Linux ELF binary (%v); build it for linux with CGO_ENABLED=0", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New(path + " is dynamically linked and would not run in the server image (it has no libc); " +
				"build a static binary first: CGO_ENABLED=0 go build -o python-docker-mcp ./cmd/python-docker-mcp (or run `make server-image`)")
		}
	}
	return nil
}

// serverRoot is the image's root filesystem as a tar stream.
func serverRoot(exe string) ([]byte, error) {
	bin, err := os.ReadFile(exe)
	if err != nil {
		return nil, err
	}
	var ca []byte
	for _, p := range caBundles {
		if ca, err = os.ReadFile(p); err == nil {
			break
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: now})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, step := range []func() error{
		func() error { return dir("tmp/", 0o1777) },
		func() error { return dir("root/", 0o700) },
		func() error { return dir("etc/", 0o755) },
		func() error { return file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\n")) },
		func() error { return file("etc/group", 0o644, []byte("root:x:0:\n")) },
		func() error { return dir("etc/ssl/", 0o755) },
		func() error { return dir("etc/ssl/certs/", 0o755) },
		func() error {
			if ca == nil {
				return nil
			}
			return file("etc/ssl/certs/ca-certificates.crt", 0o644, ca)
		},
		func() error { return file("python-docker-mcp", 0o755, bin) },
		tw.Close,
	} {
		if err := step(); err != nil {
			return nil, fmt.Errorf("root filesystem: %w", err)
		}
	}
	return buf.Bytes(), nil
}
