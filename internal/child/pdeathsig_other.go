//go:build !linux

package child

import "os/exec"

// DieWithParent: only Linux can tie a child's life to its parent's;
// elsewhere the harnesses' own cleanups alone stop the children.
func DieWithParent(*exec.Cmd) {}
