package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"

	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/provider/webpush"
	"github.com/oncepush/oncepush/pushtest"
)

// The files fake-providers writes into its directory.
const (
	fakeFCMFile    = "fcm-service-account.json"
	fakeAPNsFile   = "apns-key.p8"
	fakeCAFile     = "fake-ca.pem"
	fakeConfigFile = "oncepush.json"
)

// fakeProviders runs a pushtest.FakeServer as a process until ctx ends. It
// writes the credentials a server needs to talk to it, and prints (and
// writes) a configuration file that points every provider at it.
func fakeProviders(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("fake-providers", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to listen on (port 0: a free port, shown in the printed configuration)")
	dir := fs.String("dir", "", "directory for the credential files and "+fakeConfigFile+" (default: a new temporary directory, removed at exit)")
	project := fs.String("project", "oncepush-test", "FCM and RuStore project id")
	topic := fs.String("topic", "dev.oncepush.test", "APNs topic (the app's bundle id)")
	if err := parse(fs, e, args); err != nil {
		return err
	}
	if err := loopbackOnly(*listen); err != nil {
		return err
	}
	if *project == "" || *topic == "" {
		return usagef("--project and --topic must not be empty")
	}

	fake, err := pushtest.StartFakeServer(&pushtest.FakeOptions{Addr: *listen})
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
	if err := os.WriteFile(filepath.Join(out, fakeConfigFile), b, 0o600); err != nil {
		return &config.Error{Setting: "--dir", Problem: err.Error()}
	}
	if _, err := e.stdout.Write(b); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "oncepush fake-providers: serving FCM, APNs, Web Push and RuStore at %s\n"+
		"  configuration: %s (printed above; run 'oncepush serve --config %[2]s')\n"+
		"  control endpoints: %[1]s%[3]s (requests, received, stats, program, mix, latency, reset, webpush/subscriptions)\n"+
		"  stop with Ctrl-C or SIGTERM\n", fake.URL, filepath.Join(out, fakeConfigFile), pushtest.ControlPrefix)

	<-ctx.Done()
	fmt.Fprintln(e.stderr, "oncepush fake-providers: stopped")
	return nil
}

// loopbackOnly refuses an address other than a loopback one: the fake has no
// authentication, and its certificate is valid for 127.0.0.1 and ::1 only.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return &config.Error{Setting: "--listen", Problem: fmt.Sprintf("%q is not host:port (%v)", addr, err)}
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return &config.Error{Setting: "--listen", Problem: fmt.Sprintf("%q is not a loopback address: the fake providers are for tests on this machine (127.0.0.1)", addr)}
}

// fakeConfig writes the fake's credentials into dir and returns a
// configuration whose providers all point at the fake.
func fakeConfig(fake *pushtest.FakeServer, dir, project, topic string) (*config.File, error) {
	write := func(name string, b []byte) (string, error) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return "", &config.Error{Setting: "--dir", Problem: err.Error()}
		}
		return p, nil
	}
	ca, err := write(fakeCAFile, fake.CertificatePEM())
	if err != nil {
		return nil, err
	}
	sa, err := write(fakeFCMFile, fake.FCMServiceAccount(project))
	if err != nil {
		return nil, err
	}
	p8, keyID, teamID := fake.APNsKey()
	keyFile, err := write(fakeAPNsFile, p8)
	if err != nil {
		return nil, err
	}
	_, vapidKey, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		return nil, fmt.Errorf("generate a VAPID key: %w", err)
	}
	u, err := url.Parse(fake.URL)
	if err != nil {
		return nil, err
	}
	f := &config.File{}
	f.Providers = config.Providers{
		FCM: &config.FCM{ServiceAccountFile: sa, BaseURL: fake.URL + "/fcm", CAFile: ca},
		APNs: &config.APNs{KeyFile: keyFile, KeyID: keyID, TeamID: teamID, Topic: topic,
			Host: fake.URL, CAFile: ca},
		WebPush: &config.WebPush{VAPIDPrivateKey: vapidKey, VAPIDSubject: "mailto:tests@oncepush.invalid",
			AllowedHosts: []string{u.Hostname()}, AllowLoopback: true, CAFile: ca},
		RuStore: &config.RuStore{ProjectID: project, ServiceToken: fake.RuStoreToken(),
			BaseURL: fake.URL + "/rustore", CAFile: ca},
	}
	return f, nil
}
