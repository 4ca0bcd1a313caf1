// Package cli is the oncepush command: serve, work, migrate, keys, vapid, send,
// fake-providers, version. The command names and flags are part of the
// product; keep them stable.
package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/internal/registry"
)

// Set at build time by scripts/release (-ldflags "-X
// github.com/oncepush/oncepush/internal/cli.Version=v1.2.3"); empty, they
// come from the build information (buildInfo).
var (
	// Version is the release's version.
	Version = ""
	// Commit is the release's commit (a git worktree records none itself).
	Commit = ""
	// Date is when the release was built, RFC 3339 in UTC: its
	// SOURCE_DATE_EPOCH, so that two builds of one commit are the same
	// bytes.
	Date = ""
)

// env is what a command works with.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	logFile        *os.File // where logs go (stderr)
	summary        string   // what the command run does, for its help
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
	if len(args) == 0 || isHelp(args[0]) {
		printUsage(stdout)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "oncepush: unknown command %q\n\n", args[0])
		printUsage(stderr)
		return 2
	}
	e.summary = cmd.summary
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
		// One line per problem (config.Errors has several): each says
		// which command it comes from.
		for line := range strings.SplitSeq(err.Error(), "\n") {
			fmt.Fprintf(stderr, "oncepush %s: %s\n", args[0], line)
		}
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
	fs.StringVar(&f.Database, "database", "", "PostgreSQL URL (postgres://…), or SQLite file path or file: URL [$"+config.EnvDatabase+"] (default "+config.DatabaseDefault+")")
	fs.StringVar(&f.Config, "config", "", "configuration file (JSON) [$"+config.EnvConfig+"]")
	fs.StringVar(&f.LogFormat, "log-format", "", "text or json [$"+config.EnvLogFormat+"] (default text)")
	fs.StringVar(&f.LogLevel, "log-level", "", "debug, info, warn or error [$"+config.EnvLogLevel+"] (default info)")
	return f
}

// subcommand is one command of a command that has several (keys, vapid).
type subcommand struct {
	name, args, summary string
}

// subcommands are the commands' own commands, in the order their usage
// lists them.
var subcommands = map[string][]subcommand{
	"keys": {
		{"create", "--name N [--scope send,devices,read,campaigns,admin]", "create an API key and print it, once"},
		{"list", "", "list the API keys (never their secrets)"},
		{"revoke", "ID", "revoke an API key (the opk_… id that 'keys list' shows)"},
	},
	"vapid": {{"generate", "[--json]", "generate a VAPID key pair for Web Push"}},
}

// printSubcommands prints what a command with subcommands does, and each of
// them.
func printSubcommands(e *env, cmd string) {
	w := e.stdout
	fmt.Fprintf(w, "oncepush %s: %s\n\nUsage:\n", cmd, e.summary)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range subcommands[cmd] {
		fmt.Fprintf(tw, "  oncepush %s %s %s\t%s\n", cmd, s.name, s.args, s.summary)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nRun 'oncepush %s <command> -h' for a command's flags.\n", cmd)
}

// subcommandUsage is the usage error of a command with subcommands called
// without one, or with one it does not have.
func subcommandUsage(cmd string, args []string) error {
	names := make([]string, 0, len(subcommands[cmd]))
	for _, s := range subcommands[cmd] {
		names = append(names, s.name)
	}
	problem := "which command?"
	switch {
	case len(args) > 0 && strings.HasPrefix(args[0], "-"):
		// Flags may follow the command, anywhere after it, but the command
		// comes first: which flags there are depends on it.
		problem = fmt.Sprintf("the command comes before its flags (oncepush %s <command> %s …)", cmd, args[0])
	case len(args) > 0:
		problem = fmt.Sprintf("unknown command %q", args[0])
	}
	return usagef("%s (%s; see 'oncepush %s --help')", problem, strings.Join(names, ", "), cmd)
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// printHelp prints what the command fs parses for does, how it is called
// and its flags.
func printHelp(e *env, fs *flag.FlagSet) {
	w, summary, args := e.stdout, e.summary, ""
	if cmd, sub, ok := strings.Cut(fs.Name(), " "); ok {
		for _, s := range subcommands[cmd] {
			if s.name == sub {
				summary, args = s.summary, s.args
			}
		}
	}
	fmt.Fprintf(w, "oncepush %s: %s\n\nUsage: oncepush %s", fs.Name(), summary, fs.Name())
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags && !strings.Contains(args, "--") {
		fmt.Fprint(w, " [flags]")
	}
	if args != "" {
		fmt.Fprint(w, " "+args)
	}
	fmt.Fprintln(w)
	if hasFlags {
		fmt.Fprint(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// parse parses flags. -h or --help prints the command's help to stdout and
// returns flag.ErrHelp (exit code 0); a flag error is a usage error, said
// once, with a hint to the help.
func parse(fs *flag.FlagSet, e *env, args []string) error {
	// The flag package would print the error and the flag list to stderr
	// before returning the error, which Main prints again.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(flagsFirst(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(e, fs)
			return err
		}
		return usagef("%v (see 'oncepush %s --help')", err, fs.Name())
	}
	if fs.NArg() > 0 && fs.Name() != "keys revoke" {
		return usagef("unexpected argument %q (see 'oncepush %s --help')", strings.Join(fs.Args(), " "), fs.Name())
	}
	return nil
}

// flagsFirst moves fs's flags in args before its arguments, keeping the
// order of each, so that a flag may follow an argument as people type
// them ("keys revoke ID --database …"): the flag package stops at the
// first argument. "--" ends the flags; what follows it is an argument even
// if it starts with a dash. A flag that takes a value and is not written
// --name=value takes the next word with it, whatever that word is, as the
// flag package does. A flag fs does not know is left for Parse to refuse.
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			rest = append(rest, args[i+1:]...)
			i = len(args)
		case len(a) < 2 || a[0] != '-':
			rest = append(rest, a)
		default:
			flags = append(flags, a)
			name := strings.TrimPrefix(a[1:], "-")
			if strings.Contains(name, "=") || i+1 == len(args) {
				continue
			}
			if f := fs.Lookup(name); f != nil && !isBoolFlag(f) {
				i++
				flags = append(flags, args[i])
			}
		}
	}
	return append(append(flags, "--"), rest...)
}

// isBoolFlag reports whether f is a flag that takes no value (-json), as
// the flag package tells.
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func version() string { return buildInfo().Version }

func printVersion(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON {version, commit, modified, date, go, platform}")
	if err := parse(fs, e, args); err != nil {
		return err
	}
	b := buildInfo()
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(b)
	}
	commit := cmp.Or(b.Commit, "unknown")
	if b.Modified {
		commit += " (with changes not committed)"
	}
	_, err := fmt.Fprintf(e.stdout, "oncepush %s\ncommit %s\nbuilt %s\n%s %s\n",
		b.Version, commit, cmp.Or(b.Date, "unknown"), b.Go, b.Platform)
	return err
}
