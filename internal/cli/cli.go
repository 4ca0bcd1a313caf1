// Package cli is the oncepush command: serve, work, migrate, keys, vapid, send,
// fake-providers, version. The command names and flags are part of the
// product; keep them stable.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/internal/registry"
)

// Version is set at build time (-ldflags "-X …/internal/cli.Version=v1.2.3");
// otherwise the module version from the build information, or "dev".
var Version = ""

// env is what a command works with.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	logFile        *os.File // where logs go (stderr)
}

type command struct {
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

// commands is the command table: every command, in one place.
var commands = map[string]command{
	"serve":          {"run the HTTP API, the delivery workers and cleanup", serveCommand},
	"work":           {"run the delivery workers and cleanup only (no API)", workCommand},
	"migrate":        {"apply the database migrations", migrate},
	"keys":           {"create, list and revoke API keys", keys},
	"vapid":          {"generate a VAPID key pair for Web Push", vapid},
	"send":           {"queue one notification (a running serve or work delivers it)", send},
	"fake-providers": {"run fake " + registry.Default().Titles() + " servers for integration tests", fakeProviders},
	"version":        {"print the version", printVersion},
}

// errUsage marks an error in how the command was called (exit code 2).
type usageError struct{ msg string }

func (u *usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// Main runs the command line (without the program name) and returns the exit
// code: 0 success, 1 failure, 2 misuse. ctx ends on SIGINT/SIGTERM.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	e := &env{stdout: stdout, stderr: stderr, getenv: getenv, logFile: os.Stderr}
	if f, ok := stderr.(*os.File); ok {
		e.logFile = f
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stdout)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "oncepush: unknown command %q\n\n", args[0])
		printUsage(stderr)
		return 2
	}
	err := cmd.run(ctx, e, args[1:])
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "oncepush %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "oncepush %s: %v\n", args[0], err)
		return 1
	}
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "oncepush delivers push notifications at most once per device, and never loses one.")
	fmt.Fprintln(w, "\nUsage: oncepush <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-15s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'oncepush <command> -h' for a command's flags.")
}

// commonFlags are the settings every command that opens the database takes.
func commonFlags(fs *flag.FlagSet) *config.Flags {
	f := &config.Flags{}
	fs.StringVar(&f.Database, "database", "", "PostgreSQL URL (postgres://…) or SQLite file path [$"+config.EnvDatabase+"] (default "+config.DatabaseDefault+")")
	fs.StringVar(&f.Config, "config", "", "configuration file (JSON) [$"+config.EnvConfig+"]")
	fs.StringVar(&f.LogFormat, "log-format", "", "text or json [$"+config.EnvLogFormat+"] (default text)")
	fs.StringVar(&f.LogLevel, "log-level", "", "debug, info, warn or error [$"+config.EnvLogLevel+"] (default info)")
	return f
}

// parse parses flags; a flag error is a usage error.
func parse(fs *flag.FlagSet, e *env, args []string) error {
	fs.SetOutput(e.stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%v", err)
	}
	if fs.NArg() > 0 && fs.Name() != "keys revoke" {
		return usagef("unexpected argument %q", strings.Join(fs.Args(), " "))
	}
	return nil
}

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func printVersion(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if err := parse(fs, e, args); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "oncepush", version())
	return nil
}
