package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/internal/stack"
	"github.com/oncepush/oncepush/provider/webpush"
)

func migrate(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	f := commonFlags(fs)
	if err := parse(fs, e, args); err != nil {
		return err
	}
	_, db, err := open(ctx, e, f, false)
	if err != nil {
		return err
	}
	defer db.Close()
	engine, srv, err := db.Migrate(ctx)
	if err != nil {
		return err
	}
	// The engine's schema, then the server's own: numbered apart.
	for _, m := range []struct {
		what string
		res  *driver.MigrateResult
	}{{"", engine}, {"server ", srv}} {
		if len(m.res.Applied) == 0 {
			fmt.Fprintf(e.stdout, "%s: %sschema is current (version %d)\n", db.Name, m.what, m.res.Version)
		} else {
			fmt.Fprintf(e.stdout, "%s: applied %smigrations %v; %sschema version %d\n", db.Name, m.what, m.res.Applied, m.what, m.res.Version)
		}
	}
	return nil
}

func vapid(ctx context.Context, e *env, args []string) error {
	switch {
	case len(args) > 0 && isHelp(args[0]):
		printSubcommands(e, "vapid")
		return flag.ErrHelp
	case len(args) == 0 || args[0] != "generate":
		return subcommandUsage("vapid", args)
	}
	fs := flag.NewFlagSet("vapid generate", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, e, args[1:]); err != nil {
		return err
	}
	pub, priv, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(map[string]string{"publicKey": pub, "privateKey": priv})
	}
	fmt.Fprintf(e.stdout, "public key (applicationServerKey for PushManager.subscribe):\n  %s\n"+
		"private key (providers.webpush.vapidPrivateKey; keep it secret):\n  %s\n", pub, priv)
	return nil
}

// open loads the settings and opens the database they name; with migrated,
// it also makes sure both schemas are migrated, for the commands that write.
func open(ctx context.Context, e *env, f *config.Flags, migrated bool) (*config.Settings, *stack.Storage, error) {
	st, err := config.Load(*f, e.getenv)
	if err != nil {
		return nil, nil, err
	}
	opener := stack.Open
	if migrated {
		opener = stack.OpenMigrated
	}
	db, err := opener(ctx, st)
	if err != nil {
		return nil, nil, err
	}
	return st, db, nil
}

// scopeList is a repeatable, comma-separable --scope flag.
type scopeList []string

func (s *scopeList) String() string { return strings.Join(*s, ",") }
func (s *scopeList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

func keys(ctx context.Context, e *env, args []string) error {
	switch {
	case len(args) == 0:
		return subcommandUsage("keys", args)
	case isHelp(args[0]):
		printSubcommands(e, "keys")
		return flag.ErrHelp
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("keys "+sub, flag.ContinueOnError)
	f := commonFlags(fs)
	// Each subcommand says what its flags and arguments must be (check, once
	// parsed) and what it does on the migrated database (act).
	check := func() error { return nil }
	var act func(db *stack.Storage) error
	switch sub {
	case "create":
		name := fs.String("name", "", "a name for the key (required): who or what uses it")
		var scopes scopeList
		fs.Var(&scopes, "scope", "scope, repeatable or comma-separated: "+strings.Join(apikey.AllScopes, ", ")+" (default "+strings.Join(apikey.DefaultScopes, ",")+")")
		var sc []string
		check = func() (err error) {
			if strings.TrimSpace(*name) == "" {
				return usagef("--name is required")
			}
			if sc, err = apikey.ParseScopes(scopes); err != nil {
				return usagef("--scope: %v", err)
			}
			return nil
		}
		act = func(db *stack.Storage) error {
			k, err := createKey(ctx, db.Server, *name, sc)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s\n", string(k))
			fmt.Fprintf(e.stderr, "Created key %s (%s, scopes %s). It is shown only this once.\n", k.ID(), *name, strings.Join(sc, ","))
			return nil
		}
	case "list":
		act = func(db *stack.Storage) error {
			list, err := db.Server.APIKeyList(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tSCOPES\tCREATED\tREVOKED")
			for _, k := range list {
				revoked := "-"
				if k.RevokedAt != nil {
					revoked = k.RevokedAt.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, strings.Join(k.Scopes, ","), k.CreatedAt.UTC().Format(time.RFC3339), revoked)
			}
			return tw.Flush()
		}
	case "revoke":
		check = func() error {
			if fs.NArg() != 1 {
				return usagef("usage: oncepush keys revoke ID (the opk_… id that 'keys list' shows)")
			}
			return nil
		}
		act = func(db *stack.Storage) error {
			id := fs.Arg(0)
			ok, err := db.Server.APIKeyRevoke(ctx, id, nil)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("no active key %q", id)
			}
			fmt.Fprintf(e.stdout, "revoked %s\n", id)
			return nil
		}
	default:
		return subcommandUsage("keys", []string{sub})
	}
	if err := parse(fs, e, args); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	_, db, err := open(ctx, e, f, true)
	if err != nil {
		return err
	}
	defer db.Close()
	return act(db)
}
