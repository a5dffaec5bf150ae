package testbed

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Addresses are numbered as the low 16 bits of 127.0.x.y, from 127.0.0.2
// (127.0.0.1 is left to everything else) to 127.0.255.254.
const (
	firstAddr = 2
	lastAddr  = 0xfffe
)

func addrIP(n int) string { return fmt.Sprintf("127.0.%d.%d", n>>8, n&0xff) }

// claimAddress takes the next free 127.0.0.x at or after *next. The claim is
// an exclusive flock held for the host's lifetime, so parallel test
// processes never share an address; the bind probe skips addresses still
// served by something else, such as an sshd left over by a crashed run.
func claimAddress(next *int) (string, *os.File, error) {
	for ; *next <= lastAddr; *next++ {
		n := *next
		if low := n & 0xff; low == 0 || low == 0xff {
			continue
		}
		ip := addrIP(n)
		f, err := os.OpenFile(filepath.Join(lockDir, ip+".lock"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return "", nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		l, err := net.Listen("tcp4", net.JoinHostPort(ip, "22"))
		if err != nil {
			f.Close()
			continue
		}
		l.Close()
		*next++
		return ip, f, nil
	}
	return "", nil, fmt.Errorf("no free address in 127.0.0.2-127.0.255.254 (is something listening on 0.0.0.0:22?)")
}

func (b *Bed) writeKnownHosts() error {
	var out []byte
	for _, h := range b.Hosts {
		h.mu.Lock()
		pub := h.pub
		h.mu.Unlock()
		addr := knownhosts.Normalize(net.JoinHostPort(h.IP, strconv.Itoa(h.Port)))
		out = append(out, knownhosts.Line([]string{addr}, pub)...)
		out = append(out, '\n')
	}
	return writeFileAtomic(b.KnownHostsPath, out, 0o644)
}

// The inventory file schema, as read by inventory.Load.
type inventoryFile struct {
	KnownHosts string                    `yaml:"known_hosts"`
	Defaults   inventoryDefaults         `yaml:"defaults"`
	Clouds     map[string]inventoryCloud `yaml:"clouds"`
	Hosts      []inventoryHost           `yaml:"hosts"`
}

type inventoryDefaults struct {
	Port         int    `yaml:"port"`
	User         string `yaml:"user"`
	IdentityFile string `yaml:"identity_file"`
}

type inventoryCloud struct {
	Bastion string `yaml:"bastion"`
}

type inventoryHost struct {
	IP           string            `yaml:"ip"`
	CloudID      int               `yaml:"bk_cloud_id"`
	SupplierID   int               `yaml:"bk_supplier_id"`
	Address      string            `yaml:"address"`
	Port         int               `yaml:"port"`
	User         string            `yaml:"user"`
	IdentityFile string            `yaml:"identity_file"`
	Groups       []string          `yaml:"groups"`
	Labels       map[string]string `yaml:"labels"`
}

// WriteInventory (re)writes InventoryPath from the current hosts. Stopped
// hosts stay listed: to drover they are hosts that are down.
func (b *Bed) WriteInventory() error {
	f := inventoryFile{
		KnownHosts: b.KnownHostsPath,
		Defaults:   inventoryDefaults{Port: 22, User: "root", IdentityFile: b.ClientKeyPath},
		Clouds:     map[string]inventoryCloud{},
	}
	for _, h := range b.Hosts {
		role := "web"
		if h.Index%2 == 1 {
			role = "db"
		}
		f.Hosts = append(f.Hosts, inventoryHost{
			IP:           h.IP,
			CloudID:      h.cloud,
			Address:      h.IP,
			Port:         h.Port,
			User:         "root",
			IdentityFile: b.ClientKeyPath,
			Groups:       []string{"all-bed", role},
			Labels:       map[string]string{"idx": strconv.Itoa(h.Index)},
		})
	}
	data, err := yaml.Marshal(&f)
	if err != nil {
		return err
	}
	return writeFileAtomic(b.InventoryPath, data, 0o644)
}
