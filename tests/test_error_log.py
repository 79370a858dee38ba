"""The unexpected gets one line and a log file, even where the cache folder cannot be written."""
import argparse
import pathlib
import tempfile

from dptop import cli


def test_a_read_only_cache_folder_still_gives_one_line(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    (cache / "dptop").mkdir(parents=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    real = pathlib.Path.write_text

    def read_only(self, *args, **kwargs):
        if str(self).startswith(str(cache)):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", read_only)

    def broken(args):
        raise RuntimeError("something unexpected")

    rc = cli._dispatch(argparse.Namespace(func=broken))
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    logged = err.split("details in ")[1].strip()
    assert logged.startswith(str(tmp_path / "tmp")) and "something unexpected" in pathlib.Path(logged).read_text()
