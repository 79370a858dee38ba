"""The window on a live link (dptop.lab.livewindow): a veth pair between two namespaces, the paced
sender offering 2,000 frames/s with a 30 % and a 10 % source among 10,000 others, the window with
its first-start defaults capturing the veth end under Xvfb; each private panel shows each source
by its stated time, counted from the first packet. The frames the sender writes are checked
first, cheaply, through the capture's own parser."""
import struct

import pytest

from dptop.capture.lab import paced
from dptop.capture.pcap import read_keys
from dptop.engine.core.keys import addresses_from_keys
from dptop.lab import livewindow


def test_the_interface_sender_writes_udp_frames_the_capture_counts_by_source(tmp_path):
    """Every frame: a valid IPv4 header checksum, the UDP port, and the source address the
    capture's own pcap parser reads back; the others follow in turn over ``OTHERS_NET``."""
    sources = ["10.0.0.30", "10.0.0.10", str(paced.OTHERS_NET[1]), str(paced.OTHERS_NET[9999])]
    frames = [paced.udp_frame(a) for a in sources]
    for frame in frames:
        header = frame[14:34]
        total = sum(struct.unpack("!10H", header))
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        assert total == 0xFFFF, frame.hex()  # the ones'-complement sum of a valid header
        assert struct.unpack("!H", frame[36:38])[0] == paced.PORT
    path = tmp_path / "frames.pcap"
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))  # Ethernet
        for i, frame in enumerate(frames):
            fh.write(struct.pack("<IIII", 1_700_000_000 + i, 0, len(frame), len(frame)) + frame)
    keys, _, _ = read_keys(path)
    assert addresses_from_keys(keys) == sources


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.skipif(livewindow.available() is not None, reason=livewindow.available() or "")
def test_the_window_on_a_2000_per_s_live_link_shows_both_sources_in_time(tmp_path):
    row = livewindow.one_run(livewindow.SECONDS, tmp_path)
    print(f"\nlive window: {row['first']} (sent {row['sent']['sent']}, {row['drops']}, load {row['load']})")
    assert row["error"] is None
    sent, packets = row["sent"]["sent"], row["sent"]["packets"]
    # the link carried the shares at about its rate (a busy machine makes the sender skip slots, never burst)
    assert packets >= 0.9 * livewindow.RATE * livewindow.SECONDS, row["sent"]
    for address, share in livewindow.SOURCES.items():
        assert abs(sent[address] / packets - share) < 0.005, row["sent"]
    for panel, targets in livewindow.TARGETS.items():
        for share, deadline in targets.items():
            seconds = row["first"][panel][str(share)]
            assert seconds is not None and seconds <= deadline, (panel, share, row["first"])
    assert [name for name, _ in row["shots"]] == [f"window-{at}s.png" for at in livewindow.SHOTS]
