package localpg

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// unprivilegedUser picks who runs the server for root: the owner of an
// existing cluster in dir (so one created earlier keeps working), else the
// postgres user, else nobody.
func unprivilegedUser(dir string) (*syscall.Credential, error) {
	if fi, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
			if u, err := user.LookupId(strconv.Itoa(int(st.Uid))); err == nil {
				return credential(u)
			}
			return &syscall.Credential{Uid: st.Uid, Gid: st.Gid, Groups: []uint32{}}, nil
		}
	}
	for _, name := range []string{"postgres", "nobody"} {
		if u, err := user.Lookup(name); err == nil {
			return credential(u)
		}
	}
	return nil, errors.New("local PostgreSQL: running as root, and PostgreSQL refuses root; " +
		"there is neither a postgres nor a nobody user to run it as")
}

func credential(u *user.User) (*syscall.Credential, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	c := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(g) != c.Gid {
				c.Groups = append(c.Groups, uint32(g))
			}
		}
	}
	return c, nil
}

// canTraverse reports whether the user of cred can search every existing
// directory from / down to dir. Missing directories are created later by us
// with mode 0755 and so do not block (the umask is checked by re-checking
// after creating them). ACLs are not consulted.
func canTraverse(cred *syscall.Credential, dir string) bool {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			st := fi.Sys().(*syscall.Stat_t)
			var bit os.FileMode
			switch {
			case st.Uid == cred.Uid:
				bit = 0o100
			case st.Gid == cred.Gid || slices.Contains(cred.Groups, st.Gid):
				bit = 0o010
			default:
				bit = 0o001
			}
			if fi.Mode().Perm()&bit == 0 {
				return false
			}
		}
		if p == filepath.Dir(p) {
			return true
		}
	}
}
