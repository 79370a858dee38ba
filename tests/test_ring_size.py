"""The live ring is sized in time (dptop.capture.ring): 5 s of small frames at 1M frames/s, and
no more than its share of the memory available, never less than the floor."""
from dptop.capture import ring


def test_the_ring_holds_5_s_at_a_million_small_frames_per_second():
    frames = ring.N_BLOCKS * (ring.BLOCK_SIZE // ring.FRAME_RING_BYTES)
    assert frames >= ring.STALL_SECONDS * ring.STALL_RATE == 5_000_000
    assert (ring.N_BLOCKS - 1) * (ring.BLOCK_SIZE // ring.FRAME_RING_BYTES) < 5_000_000  # and no more
    assert ring.ring_blocks(None) == ring.ring_blocks(1 << 40) == ring.N_BLOCKS


def test_its_memory_is_a_share_of_what_is_available_never_below_the_floor():
    for available in (1 << 30, 2 << 30, 3 << 30, 4 << 30):
        blocks = ring.ring_blocks(available)
        assert blocks * ring.BLOCK_SIZE <= max(available * ring.MEMORY_SHARE, ring.MIN_BLOCKS * ring.BLOCK_SIZE)
        assert blocks >= ring.MIN_BLOCKS
    assert ring.ring_blocks(1 << 30) == ring.MIN_BLOCKS  # 1 GiB: an eighth is the floor's 128 MiB
    assert ring.ring_blocks(2 << 30) == 128
    assert ring.ring_blocks(0) == ring.MIN_BLOCKS


def test_memory_available_reads_the_kernel():
    available = ring.memory_available()
    assert available is None or available > 0
