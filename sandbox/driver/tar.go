package driver

import (
	"archive/tar"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// AddTree writes the tree at dir (a Spec.Template) to tw, each name under
// prefix ("" for none, else slash-separated without a trailing slash), for
// a driver that copies a template into its sandbox as a tar stream.
// Directories, regular files and symlinks (kept as links, for the file API
// to refuse following out of the workspace) are written, owned by root;
// sockets, FIFOs and devices are not part of a template and are skipped.
// dir itself is not written. AddTree returns the names of the directories
// it wrote, so that a caller adding more files writes only the parents
// still missing.
func AddTree(tw *tar.Writer, dir, prefix string) (dirs []string, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		var link string
		if d.Type()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		if !d.IsDir() && !d.Type().IsRegular() && link == "" {
			return nil
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = path.Join(prefix, filepath.ToSlash(rel))
		if d.IsDir() {
			dirs = append(dirs, h.Name)
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.Type().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	return dirs, err
}
