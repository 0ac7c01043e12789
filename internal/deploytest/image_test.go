package deploytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxImageBytes is the budget for the image (NFR-018 allows 200 MB).
const maxImageBytes = 40 << 20

// repoRoot is the module root, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	return root
}

// needBuildah returns buildah's path, installing Debian's package when it is missing (as
// scripts/services.sh does for Postgres and Redis); it skips the test only when that cannot work.
func needBuildah(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("buildah"); err == nil {
		return p
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		t.Skip("buildah is not installed and cannot be (needs apt-get as root): install buildah to check the image")
	}
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "buildah"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("buildah is not installed and apt-get %s failed (%v): %s", args[0], err, tail(out))
		}
	}
	p, err := exec.LookPath("buildah")
	require.NoError(t, err, "apt-get installed buildah, yet it is not on PATH")
	return p
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}

// copyFile copies src to dst, creating dst's directory.
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

// TestImage builds the Dockerfile's runtime stage from a locally built binary (no base image
// can be pulled here: --build-arg ROOTFS=prebuilt) and inspects the result. It does not run the
// image: podman/crun cannot start containers in this sandbox.
//
// It builds a static jq (minutes on a cold cache) and may install buildah, so the normal suite
// skips it: `go tool -modfile=tools/go.mod task deploy:check` runs it with JQ_TEST_IMAGE=1.
func TestImage(t *testing.T) {
	if os.Getenv("JQ_TEST_IMAGE") != "1" {
		t.Skip("set JQ_TEST_IMAGE=1 (go tool -modfile=tools/go.mod task deploy:check) to build and inspect the image with buildah")
	}
	buildah := needBuildah(t)
	root := repoRoot(t)
	ctxDir := t.TempDir()
	rootfs := filepath.Join(ctxDir, "rootfs")

	// The binary, exactly as the Dockerfile's build stage makes it.
	const pkg = "github.com/jq-dev/jq/internal/buildinfo"
	ldflags := fmt.Sprintf("-s -w -X %s.Version=v0.0.0-deploytest -X %s.Commit=deploytest", pkg, pkg)
	build := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", filepath.Join(rootfs, "jq"), ".")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	for _, f := range []string{"etc/passwd", "etc/group"} {
		copyFile(t, filepath.Join(root, "deploy/rootfs", f), filepath.Join(rootfs, f), 0o644)
	}
	copyFile(t, "/etc/ssl/certs/ca-certificates.crt", filepath.Join(rootfs, "etc/ssl/certs/ca-certificates.crt"), 0o644)
	require.NoError(t, os.MkdirAll(filepath.Join(rootfs, "tmp"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(rootfs, "tmp"), 0o1777))

	// A private store: nothing shared with other users of buildah on this machine.
	store := t.TempDir()
	bud := func(args ...string) []byte {
		t.Helper()
		full := append([]string{"--storage-driver", "vfs", "--root", filepath.Join(store, "root"),
			"--runroot", filepath.Join(store, "run")}, args...)
		cmd := exec.Command(buildah, full...)
		cmd.Env = append(os.Environ(), "BUILDAH_ISOLATION=chroot")
		out, err := cmd.Output()
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		require.NoError(t, err, "buildah %s: %s", strings.Join(args, " "), tail(stderr))
		return out
	}
	const tag = "localhost/jq:deploytest"
	// Docker format: OCI image configs have no HEALTHCHECK.
	bud("bud", "--format", "docker", "--layers=false", "-f", filepath.Join(root, "Dockerfile"),
		"--build-arg", "ROOTFS=prebuilt", "--build-arg", "VERSION=v0.0.0-deploytest",
		"--build-arg", "COMMIT=deploytest", "-t", tag, ctxDir)
	t.Cleanup(func() { bud("rmi", "--force", tag) })

	var img struct {
		Manifest string `json:"Manifest"`
		Docker   struct {
			Config struct {
				User         string              `json:"User"`
				Entrypoint   []string            `json:"Entrypoint"`
				Env          []string            `json:"Env"`
				Labels       map[string]string   `json:"Labels"`
				ExposedPorts map[string]struct{} `json:"ExposedPorts"`
				Healthcheck  *struct {
					Test []string `json:"Test"`
				} `json:"Healthcheck"`
			} `json:"config"`
		} `json:"Docker"`
	}
	require.NoError(t, json.Unmarshal(bud("inspect", "--type", "image", tag), &img))
	cfg := img.Docker.Config

	require.Equal(t, "65532:65532", cfg.User)
	uid, _, _ := strings.Cut(cfg.User, ":")
	n, err := strconv.Atoi(uid)
	require.NoError(t, err, "the user must be numeric for runAsNonRoot")
	require.NotZero(t, n, "the image must not run as root (FR-049)")
	require.Equal(t, []string{"/jq"}, cfg.Entrypoint)
	require.Contains(t, cfg.Env, "JQ_ROLE=server")
	require.NotNil(t, cfg.Healthcheck, "HEALTHCHECK missing")
	require.Equal(t, []string{"CMD", "/jq", "healthcheck"}, cfg.Healthcheck.Test)
	for _, p := range []string{"50051/tcp", "9090/tcp", "8080/tcp", "8088/tcp", "9091/tcp", "8081/tcp", "9092/tcp"} {
		require.Contains(t, cfg.ExposedPorts, p)
	}
	for _, l := range []string{"title", "description", "source", "version", "revision"} {
		require.NotEmpty(t, cfg.Labels["org.opencontainers.image."+l], "label org.opencontainers.image.%s", l)
	}
	require.Equal(t, "v0.0.0-deploytest", cfg.Labels["org.opencontainers.image.version"])

	// The image's size is the sum of its (uncompressed) layers, as the manifest lists them.
	var manifest struct {
		Layers []struct {
			Size int64 `json:"size"`
		} `json:"layers"`
	}
	require.NoError(t, json.Unmarshal([]byte(img.Manifest), &manifest))
	require.NotEmpty(t, manifest.Layers)
	var size int64
	for _, l := range manifest.Layers {
		size += l.Size
	}
	t.Logf("image %s: %d bytes (%.1f MB) in %d layer(s)", tag, size, float64(size)/(1<<20), len(manifest.Layers))
	require.LessOrEqual(t, size, int64(maxImageBytes), "image over 40 MB")
}
