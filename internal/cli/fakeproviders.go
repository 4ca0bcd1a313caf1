package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/internal/fakepush"
	"github.com/oncepush/oncepush/internal/registry"
)

// fakeConfigFile is the configuration fake-providers writes into its
// directory, beside the credentials of every transport (internal/registry).
const fakeConfigFile = "oncepush.json"

// fakeProviders runs the fake providers (internal/fakepush, what
// pushtest.FakeServer is) as a process until ctx ends. It writes the
// credentials a server needs to talk to them, and prints (and writes) a
// configuration file that points every provider at them.
func fakeProviders(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("fake-providers", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to listen on (port 0: a free port, shown in the printed configuration)")
	dir := fs.String("dir", "", "directory for the credential files and "+fakeConfigFile+" (default: a new temporary directory, removed at exit)")
	project := fs.String("project", "oncepush-test", "FCM and RuStore project id")
	topic := fs.String("topic", "dev.oncepush.test", "APNs topic (the app's bundle id)")
	connect := fs.String("connect-listen", "", "also serve an HTTP CONNECT proxy on this loopback address that tunnels every host to the fake (HTTPS_PROXY for a client that dials a provider's real host; use with --cert-name)")
	var certNames nameList
	fs.Var(&certNames, "cert-name", "a host name the fake's certificate also names, repeatable (such as fcm.googleapis.com, for a client tunnelled to the fake; the fake serves FCM's own path too)")
	if err := parse(fs, e, args); err != nil {
		return err
	}
	if err := loopbackOnly("--listen", *listen); err != nil {
		return err
	}
	if *project == "" || *topic == "" {
		return usagef("--project and --topic must not be empty")
	}

	if *connect != "" {
		if err := loopbackOnly("--connect-listen", *connect); err != nil {
			return err
		}
	}
	for _, n := range certNames {
		if strings.TrimSpace(n) == "" || strings.ContainsAny(n, " /:") {
			return usagef("--cert-name %q is not a host name", n)
		}
	}

	fake, err := fakepush.Start(&fakepush.Options{Addr: *listen, CertNames: certNames, ConnectAddr: *connect})
	if err != nil {
		return &config.Error{Setting: "--listen", Problem: err.Error()}
	}
	defer fake.Close()

	out := *dir
	if out == "" {
		if out, err = os.MkdirTemp("", "oncepush-fake-"); err != nil {
			return err
		}
		// The credentials are only good for this process's fake: nothing
		// outlives it.
		defer os.RemoveAll(out)
	} else if err := os.MkdirAll(out, 0o700); err != nil {
		return &config.Error{Setting: "--dir", Problem: err.Error()}
	}
	if out, err = filepath.Abs(out); err != nil {
		return &config.Error{Setting: "--dir", Problem: err.Error()}
	}

	file, err := fakeConfig(fake, out, *project, *topic)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := writeAtomically(filepath.Join(out, fakeConfigFile), b); err != nil {
		return &config.Error{Setting: "--dir", Problem: err.Error()}
	}
	if _, err := e.stdout.Write(b); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "oncepush fake-providers: serving "+registry.Default().Titles()+" at %s\n"+
		"  configuration: %s (printed above; run 'oncepush serve --config %[2]s')\n"+
		"  control endpoints: %[1]s%[3]s (requests, received, stats, program, mix, latency, reset, webpush/subscriptions)\n"+
		"  stop with Ctrl-C or SIGTERM\n", fake.URL, filepath.Join(out, fakeConfigFile), fakepush.ControlPrefix)
	if fake.ConnectURL != "" {
		fmt.Fprintf(e.stderr, "  CONNECT proxy: %s (every host tunnelled to the fake)\n", fake.ConnectURL)
	}

	<-ctx.Done()
	fmt.Fprintln(e.stderr, "oncepush fake-providers: stopped")
	return nil
}

// nameList is a repeatable flag.
type nameList []string

func (l *nameList) String() string     { return strings.Join(*l, ",") }
func (l *nameList) Set(v string) error { *l = append(*l, v); return nil }

// loopbackOnly refuses an address other than a loopback one: the fake has no
// authentication, and its certificate is valid for 127.0.0.1 and ::1 only.
func loopbackOnly(flag, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return &config.Error{Setting: flag, Problem: fmt.Sprintf("%q is not host:port (%v)", addr, err)}
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return &config.Error{Setting: flag, Problem: fmt.Sprintf("%q is not a loopback address: the fake providers are for tests on this machine (127.0.0.1)", addr)}
}

// fakeConfig writes the fake's credentials into dir and returns a
// configuration whose providers all point at the fake.
func fakeConfig(fake *fakepush.Server, dir, project, topic string) (*config.File, error) {
	sections, err := registry.Default().FakeSections(fake, registry.FakeParams{Project: project, Topic: topic, Dir: dir})
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return nil, &config.Error{Setting: "--dir", Problem: err.Error()}
	}
	if err != nil {
		return nil, err
	}
	return &config.File{Providers: sections}, nil
}

// writeAtomically writes b to path through a temporary file in its
// directory, so that a reader waiting for the file never reads part of it.
func writeAtomically(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing to remove
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
