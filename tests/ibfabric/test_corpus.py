"""Real tool output from public sources (tests/data/fabric/SOURCES.md) reads as expected.json counts it.

expected.json was counted by hand with grep and awk; these tests hold the parsers to it. Files that are
not topologies (ibstat, ibstatus, ibswitches, ibhosts: devices without cables) are read here only for
their node descriptions, which the naming layer must classify.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from podctl.ibfabric.formats import LANE_GBPS, CablingError, parse_iblinkinfo, parse_ibnetdiscover
from podctl.ibfabric.identity import Naming, is_aggregation_node, is_factory_default
from tests.helpers.repo import REPO

DATA = REPO / "tests" / "data" / "fabric"
EXPECTED = json.loads((DATA / "expected.json").read_text())
# What the author of a published file added to the tool's output; the test takes it out and checks that
# the file as published is refused at that line.
EDITS = {"ibnetdiscover-ndr200-split-redacted-partial.txt": ("...omitted\n", 16)}


def files(*tools):
    return sorted(name for name, entry in EXPECTED.items() if not name.startswith("_") and entry["tool"] in tools)


def read(name):
    text = (DATA / name).read_text()
    if name in EDITS:
        text = text.replace(EDITS[name][0], "")
    return text


def parse(name):
    parser = parse_iblinkinfo if EXPECTED[name]["tool"] == "iblinkinfo" else parse_ibnetdiscover
    return parser(read(name), name)


def kinds(topo):
    return Counter(d.kind for d in topo.devices.values())


def test_every_file_is_counted():
    on_disk = {p.name + ("/" if p.is_dir() else "") for p in DATA.iterdir()} - {"SOURCES.md", "expected.json"}
    assert on_disk == set(EXPECTED) - {"_how_counted"}


@pytest.mark.parametrize("name", files("ibnetdiscover"))
def test_ibnetdiscover_files(name):
    expected = EXPECTED[name]
    topo = parse(name)
    sightings = sum(len(link.lines) for link in topo.links)
    assert (kinds(topo)["switch"], len(topo.links), sightings) == (
        expected["switches"],
        expected["links"],
        expected["port_lines"],
    )
    undescribed = expected.get("links_with_undescribed_far_end", 0)  # each to a CA of its own here
    assert kinds(topo)["ca"] == expected["cas"] + undescribed
    blocks = [d for d in topo.devices.values() if d.kind == "ca" and d.line and not d.masked]
    assert len({d.guid for d in blocks}) == expected["distinct_caguids"]
    assert sum(link.a.device == link.b.device for link in topo.links) == expected.get("same_node_cables", 0)
    shared = Counter(d.desc for d in topo.devices.values() if d.kind == "ca")
    assert {desc: n for desc, n in shared.items() if n > 1} == expected["shared_ca_descriptions"]
    # Each port line's rate, from the links: both ends agree, but in the man page's example (below).
    rates = Counter()
    for link in topo.links:
        rates[link.rate] += len(link.lines)
    if name != "ibnetdiscover-g-grouped-voltaire-manpage.txt":
        assert rates == Counter(expected["rates"])
    if "distinct_remote_guid_strings" in expected:
        assert (
            len({d.masked for d in topo.devices.values() if d.kind == "ca"}) == expected["distinct_remote_guid_strings"]
        )


def test_the_582_hca_dump_is_622_devices_not_515_descriptions():
    name = "ibnetdiscover-ndr-topograph-582hca.txt"
    expected = EXPECTED[name]
    topo = parse(name)
    assert len(topo.devices) == 40 + 582 == 622 and len(topo.links) == 1114 and not topo.warnings
    assert len({d.desc for d in topo.devices.values()}) == expected["distinct_descriptions"] == 515
    # Links keep both ends' GUIDs, descriptions, ports, width and speed.
    link = next(link for link in topo.links if topo.desc(link.b) == "a08-p1-dgx-04-c01 mlx5_5")
    a, b = topo.devices[link.a.device], topo.devices[link.b.device]
    assert (a.guid, a.desc, link.a.port) == (0x2C5EAB0300B87B40, "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", 1)
    assert (b.guid, b.port_guids, link.b.port, link.rate) == (0xE09D7303007A4BD8, {1: 0xE09D7303007A4BD8}, 1, "4xNDR")
    assert (a.lid, b.lid) == (73, 647)

    def kind(key):
        device = topo.devices[key]
        return "aggregation-node" if is_aggregation_node(device.desc) else "hca" if device.kind == "ca" else "switch"

    link_kinds = Counter("-".join(sorted((kind(link.a.device), kind(link.b.device)))) for link in topo.links)
    assert link_kinds == {"switch-switch": 532, "hca-switch": 542, "aggregation-node-switch": 40}
    assert {"switch-switch": 532, "switch-hca": 542, "switch-aggregation-node": 40} == expected["link_kinds"]

    naming = Naming()
    styles = Counter()
    hosts = set()
    for device in topo.devices.values():
        if device.kind == "switch":
            name_ = naming.switch_name(device.desc)
            styles["switch MF0"] += (
                name_ != device.desc and re.fullmatch(r"[AB]\d\d-P1-IB(LEAF|SPINE)-[\d-]+", name_) is not None
            )
            continue
        claim = naming.hca_claim(device.desc)
        if is_aggregation_node(device.desc):
            styles[device.desc] += 1
        elif claim is None:
            assert is_factory_default(device.desc)
            styles[device.desc] += 1
        else:
            styles["<host> HCA-n" if claim.number else "<host> mlx5_n"] += 1
            assert claim.number in (1, 2, 5, 6) or claim.hca.startswith("mlx5_")
            hosts.add(claim.host)
    assert styles.pop("switch MF0") == expected["switch_naming"]["MF0;<name>:MQM9701/U1"] == 40
    assert styles == expected["ca_naming"]
    assert len(hosts) == expected["hosts_with_named_hcas"] == 122


def test_stderr_at_the_top_is_skipped_with_a_warning_that_names_the_line():
    name = "ibnetdiscover-edr-fdr-stderr-top-nvidia-doc.txt"
    topo = parse(name)
    (warning,) = topo.warnings
    assert warning.startswith(f"{name}:1: skipped a message the tools write to stderr")
    assert EXPECTED[name]["non_topology_lines"][0].strip() in warning


def test_the_grouped_form_reads_and_the_man_pages_disagreeing_rates_are_named():
    name = "ibnetdiscover-g-grouped-voltaire-manpage.txt"
    topo = parse(name)
    assert "Non-Chassis Nodes" in (DATA / name).read_text() and EXPECTED[name]["non_topology_lines"] == [
        "Non-Chassis Nodes"
    ]
    # The example was edited by hand: two cables are 4xSDR from one end and 1xSDR from the other.
    assert [w.split(": ", 1)[0] for w in topo.warnings] == [f"{name}:26", f"{name}:52"]
    assert all("disagree on its rate: 4xSDR at line" in w and "1xSDR is kept" in w for w in topo.warnings)
    assert Counter(link.rate for link in topo.links) == {"4xSDR": 5, "1xSDR": 2}


def test_an_authors_edit_is_refused_at_its_line_and_masked_guids_are_told_apart_by_description():
    name = "ibnetdiscover-ndr200-split-redacted-partial.txt"
    with pytest.raises(CablingError, match=rf"^{name}:16: not ibnetdiscover topology output: '\.\.\.omitted'"):
        parse_ibnetdiscover((DATA / name).read_text(), name)
    topo = parse(name)
    assert sorted(d.desc for d in topo.devices.values() if d.masked == "946d<redacted>") == [
        "tj01-4090-node004 mlx5_2",
        "tj01-4090-node007 mlx5_2",
        "tj01-4090-node009 mlx5_2",
    ]
    assert [w.split(": ", 1)[1][:20] for w in topo.warnings] == ["GUIDs are masked (ed", "5 device(s) appear o"]


# iblinkinfo -S prints one switch: each of its cables is seen from that end only.
ONE_SWITCH_ONLY = {"iblinkinfo-S-hdr-switch-edr-hcas-could-be.txt": 6}


@pytest.mark.parametrize("name", files("iblinkinfo"))
def test_iblinkinfo_files(name):
    expected = EXPECTED[name]
    topo = parse(name)
    assert not topo.warnings
    blocks = [d for d in topo.devices.values() if d.kind in ("switch", "ca")]
    assert (kinds(topo)["switch"], kinds(topo)["ca"], len(topo.links)) == (
        expected["switches"],
        expected["cas"],
        expected["links"],
    )
    sightings = sum(len(link.lines) for link in topo.links)
    assert sightings == expected["active_port_lines"]
    # Every port line of a block is up or down: what is not a sighting is a Down line.
    assert sum(d.nports for d in blocks) - sightings == expected["down_port_lines"]
    lanes = Counter()
    for link in topo.links:
        lanes[f"{link.width.upper()[:-1]}X {LANE_GBPS[link.speed]}"] += len(link.lines)
    assert lanes == expected["lane_speeds"]
    one_end = sum(len(link.lines) == 1 for link in topo.links)
    assert one_end == expected.get("links_seen_from_one_end_only", ONE_SWITCH_ONLY.get(name, 0))


def test_iblinkinfo_far_ends_are_keyed_by_lid_and_description_or_their_own_block():
    topo = parse("iblinkinfo-edr-sb7700-linpack.txt")
    assert sorted(topo.devices) == ["0x248a070300928186", "0x506b4b0300820910", "0xec0d9a03003d62be", "lid 1 n01 HCA-1"]
    n02 = topo.devices["0xec0d9a03003d62be"]
    assert (n02.desc, n02.kind, n02.guid, n02.port_guids, n02.lid) == (
        "n02 HCA-1",
        "ca",
        None,
        {1: 0xEC0D9A03003D62BE},
        4,
    )
    s = parse("iblinkinfo-S-hdr-switch-edr-hcas-could-be.txt")
    far = s.devices["lid 4 MF0;d32-03-1:MQM8700/U1"]
    assert (far.kind, far.nports) == ("unknown", 40)


@pytest.mark.parametrize("name", files("ibnetdiscover -p"))
def test_ports_reports(name):
    expected = EXPECTED[name]
    topo = parse_ibnetdiscover(read(name), name)
    assert sum(len(link.lines) for link in topo.links) == expected["lines_with_peer"]
    # Lines without a peer still name their device: every GUID of the file is a device.
    lines = [line for line in read(name).splitlines() if line.strip()]
    assert len(lines) == expected["lines"]
    assert {int(word, 16) for line in lines for word in line.split() if word.startswith("0x")} == {
        d.guid or d.port_guids[min(d.port_guids)] for d in topo.devices.values()
    }


def test_ports_report_edr_links_and_spaces_kept_in_descriptions():
    topo = parse_ibnetdiscover(read("ibnetdiscover-p-ports-report-edr-osc.txt"))
    assert sorted((topo.desc(k.a), k.a.port, topo.desc(k.b), k.b.port, k.rate, len(k.lines)) for k in topo.links) == [
        ("ib-i1l1s01", 1, "ib-i1l2s01", 1, "4xEDR", 1),
        ("o0001 HCA-1", 1, "ib-i1l1s01", 10, "4xEDR", 2),
        ("o0002 HCA-1", 1, "ib-i1l1s01", 11, "4xEDR", 2),
        ("p0001 HCA-1", 1, "ib-i4l1s01", 35, "4xEDR", 2),
    ]
    hdr = parse_ibnetdiscover(read("ibnetdiscover-p-ports-report-hdr-osc.txt"), "hdr")
    assert " 5FB0406-spine-IB02 " in {d.desc for d in hdr.devices.values()}
    # The fixture puts one aggregation node (one GUID) behind two switches; the parser says so.
    (warning,) = hdr.warnings
    assert (
        "port 1 of 'Mellanox Technologies Aggregation Node' (0x946dae0300630bfe) shows 2 different far ends" in warning
    )


def test_gb200_dump_with_one_unlinked_hca():
    topo = parse("ibnetdiscover-gb200-single-ca-topograph.txt")
    (device,) = topo.devices.values()
    assert (device.desc, device.guid, topo.links) == ("dgx-gb200-n01-c1 HCA-1", 0xB8E92403009CA838, [])


def _quoted_descriptions(name):
    return re.findall(r'"([^"]*)"', (DATA / name).read_text())


def test_naming_reads_the_descriptions_of_ibswitches_and_ibhosts():
    naming = Naming()
    hdr = _quoted_descriptions("ibswitches-hdr-mf0-and-quantum-default.txt")
    assert [naming.switch_name(d) for d in hdr] == ["Quantum Mellanox Technologies", "d32-03-1"]
    assert [is_factory_default(d) for d in hdr] == [True, False]
    ndr = _quoted_descriptions("ibswitches-ndr-quantum2-default-masked-guids.txt")
    assert len(ndr) == EXPECTED["ibswitches-ndr-quantum2-default-masked-guids.txt"]["switches"] == 9
    assert len(set(ndr)) == 1 and is_factory_default(ndr[0])
    hosts = _quoted_descriptions("ibhosts-hdr-hca-n-mixed-case.txt")
    expected = EXPECTED["ibhosts-hdr-hca-n-mixed-case.txt"]
    claims = [naming.hca_claim(d) for d in hosts]
    assert len(hosts) == expected["cas"] and sum(map(is_aggregation_node, hosts)) == expected["aggregation_nodes"]
    named = [c for c in claims if c is not None]
    assert len(named) == expected["hca_lines"] == 29 and {c.number for c in named} == {1, 2, 3, 6}
    assert len({c.host.lower() for c in named}) == expected["distinct_hosts"] == 26


@pytest.mark.parametrize("name", files("ibroute"))
def test_forwarding_table_files(name):
    from podctl.ibfabric.lft import parse_lfts

    expected = EXPECTED[name]
    text = read(name)
    mark = expected.get("comment_mark")
    if mark:  # pasted into source comments: the lines less the mark and the author's `...` cuts
        lines = [line.split(mark, 1)[1] for line in text.splitlines()]
        text = "\n".join(line for line in lines if line.strip() != "...") + "\n"
    lfts = parse_lfts(text, name)
    entries = [lfts.dest[lid] for t in lfts.switches for lid in t.out]
    assert (len(lfts.switches), len(entries), sum(d.extra_path for d in entries)) == (
        expected["tables"],
        expected["entries"],
        expected["extra_paths"],
    )
    cut = [t for t in expected["trailers"] if t != len(entries) // max(1, expected["tables"])]
    assert sum("the block may be cut" in w for w in lfts.warnings) == len(cut)
    assert sum("stderr" in w for w in lfts.warnings) == expected.get("stderr_lines", 0)
