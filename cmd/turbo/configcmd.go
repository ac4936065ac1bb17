package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/turbokafka/turbo/config"
)

// configFlags are the flags of turbo config check and print.
type configFlags struct {
	config string
	sel    *selection
}

func configCommand(c *cli) *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "config",
		Short: "Check a configuration file, or print the configuration turbo would run",
	})
	cmd.AddCommand(configSub(c, "check", "Validate a configuration file: exit 0 if turbo run would accept it, 2 if not",
		`Load the file as turbo run would (environment overrides, defaults, the
consumer and topic filters, the checks of the Kafka client settings) and say
whether it is valid. Nothing connects to Kafka.`,
		`  turbo config check --config app.yaml
  TURBO_CONSUMERS_0_CONCURRENCY=500 turbo config check --config app.yaml`,
		func(cfg *config.Config, f *configFlags) error {
			names := make([]string, len(cfg.Consumers))
			for i, cons := range cfg.Consumers {
				names[i] = cons.Name
			}
			noun := "consumers"
			if len(names) == 1 {
				noun = "consumer"
			}
			_, err := fmt.Fprintf(c.stdout, "%s: valid (%d %s: %s; Kafka client %s, %s group protocol)\n",
				f.config, len(names), noun, strings.Join(names, ", "), cfg.Kafka.Client, cfg.Kafka.GroupProtocol)
			return err
		}))
	cmd.AddCommand(configSub(c, "print", "Print the effective configuration: defaults and environment applied, secrets redacted",
		`Print the configuration turbo run would run with, as YAML: every key,
defaults filled in, TURBO_* environment overrides and the consumer and topic
filters applied, durations and sizes in the forms the file accepts. Secrets
(passwords, client secrets, header values) print as [redacted]. Without
secrets, the output is itself a valid configuration file.`,
		`  turbo config print --config app.yaml
  TURBO_LOG_LEVEL=debug turbo config print --config app.yaml --include-consumers orders`,
		func(cfg *config.Config, _ *configFlags) error {
			out, err := cfg.YAML()
			if err != nil {
				return err
			}
			_, err = c.stdout.Write(out)
			return err
		}))
	return cmd
}

// configSub is one config subcommand: load and check the file as turbo run
// would, then do what with it.
func configSub(c *cli, name, short, long, example string, what func(*config.Config, *configFlags) error) *cobra.Command {
	f := &configFlags{}
	cmd := &cobra.Command{
		Use:     name + " --config FILE",
		Short:   short,
		Long:    long,
		Example: example,
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, err := loadSelected(f.config, f.sel)
			if err != nil {
				return err
			}
			return what(cfg, f)
		},
	}
	cmd.Flags().StringVar(&f.config, "config", "", configFlagHelp)
	f.sel = addSelectionFlags(cmd.Flags())
	return cmd
}
