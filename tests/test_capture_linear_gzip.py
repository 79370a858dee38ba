"""Reading a capture is linear in its size when every 64 bytes of it are a gzip member of their own
(tests/test_capture_linear.py for the method), for each block structure. A file apart from the plain
and 4 KB packings so the suite's workers read the two halves side by side."""
import pytest

from tests.test_capture_linear import STRUCTURES, assert_linear


@pytest.mark.parametrize("structure", list(STRUCTURES))
def test_every_block_structure_in_gzip_members_of_64_bytes_reads_in_linear_time(tmp_path, structure):
    assert_linear(tmp_path, structure, "gzip members of 64 B")
