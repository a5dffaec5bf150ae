package cli

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/drover-sh/drover/internal/config"
	"github.com/drover-sh/drover/inventory"
	"github.com/drover-sh/drover/proc"
)

// hostsUsage is the help of every --hosts flag.
const hostsUsage = "hosts, comma-separated: all, a group name, an ip or an agent id (as Ansible's --limit), " +
	"or explicitly group:NAME, label:K=V, CLOUD:IP, agent:ID"

func newHostsCommand() *cobra.Command {
	var selector string
	cmd := &cobra.Command{
		Use:   "hosts [--hosts SELECTOR] | hosts check [--hosts SELECTOR]",
		Short: "List the inventory's hosts, or those a selector picks; check them with `hosts check`",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, inv, hosts, err := selectHosts(cmd, selector)
			if err != nil {
				return err
			}
			// What a source's format has and drover does not read is said
			// here too, where an operator checks an inventory.
			for _, w := range inv.Warnings() {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: inventory:", w)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CLOUD\tIP\tAGENT_ID\tADDRESS\tUSER\tTRANSPORT\tGROUPS\tLABELS\tBASTION")
			for _, h := range hosts {
				labels := make([]string, 0, len(h.Labels))
				for k, v := range h.Labels {
					labels = append(labels, k+"="+v)
				}
				sort.Strings(labels)
				bastion := ""
				if h.Bastion != nil {
					bastion = h.Bastion.User + "@" + h.Bastion.Address
				}
				agent := h.AgentID
				if agent == "" {
					agent = "-"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.CloudID, h.IP, agent, h.DialAddress(), h.User, h.Transport,
					strings.Join(h.Groups, ","), strings.Join(labels, ","), bastion)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d of %d hosts selected by %q\n", len(hosts), len(inv.Hosts()), selector)
			return err
		},
	}
	cmd.Flags().StringVar(&selector, "hosts", "all", hostsUsage)
	completeProcessFlags(cmd)
	cmd.AddCommand(newHostsCheckCommand())
	return cmd
}

// selectHosts reads the configuration and the inventory, and the hosts
// selector picks there; any failure is a bad request.
func selectHosts(cmd *cobra.Command, selector string) (config.Config, *inventory.Inventory, []inventory.Host, error) {
	cfg, err := loadConfig(cmd)
	if err != nil {
		return cfg, nil, nil, err
	}
	inv, hosts, err := hostsIn(cfg, selector)
	return cfg, inv, hosts, err
}

// hostsIn loads cfg's inventory and the hosts selector picks there; any
// failure is a bad request.
func hostsIn(cfg config.Config, selector string) (*inventory.Inventory, []inventory.Host, error) {
	inv, err := loadInventory(cfg)
	if err != nil {
		return nil, nil, err
	}
	hosts, err := inv.Select(selector)
	if err != nil {
		return nil, nil, &ExitError{Code: ExitBadRequest, Err: err}
	}
	return inv, hosts, nil
}

// loadInventory loads cfg's inventory; one that does not load is a bad
// request.
func loadInventory(cfg config.Config) (*inventory.Inventory, error) {
	inv, err := inventory.Load(cfg.Inventory)
	if err != nil {
		return nil, &ExitError{Code: ExitBadRequest, Err: err}
	}
	return inv, nil
}

// hostIDs is the set of hosts' ids, to keep what concerns them.
func hostIDs(hosts []inventory.Host) map[proc.HostID]bool {
	ids := make(map[proc.HostID]bool, len(hosts))
	for _, h := range hosts {
		ids[h.ID()] = true
	}
	return ids
}
