"""probes: parsing what probe pods print (nvidia-smi formats, CPU lists, NUMA, the CUDA vector-add sample)."""

from __future__ import annotations

import pytest
import recorded

from gpuconform import probes
from gpuconform.probes import (Gpu, Mig, exclusive_ids, alignment, cpus_allowed, fmt_cpus, parse_cpulist, parse_nvidia_smi_l,
                               parse_query_csv, parse_topo_numa, sections, vector_add_result)

SMI_L = """GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-8c4f2a1e-0d3b-4e5f-a617-2b8c9d0e1f23)
"""

SMI_L_MIG = """GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901)
  MIG 1g.5gb      Device  0: (UUID: MIG-5c1a2b3d-4e5f-5a6b-9c7d-8e9f0a1b2c3d)
  MIG 1g.5gb      Device  1: (UUID: MIG-6d2b3c4e-5f60-5b7c-8d9e-0f1a2b3c4d5e)
"""


def test_nvidia_smi_l():
    assert parse_nvidia_smi_l(SMI_L) == [
        Gpu(0, "NVIDIA A100-SXM4-40GB", "GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"),
        Gpu(1, "NVIDIA A100-SXM4-40GB", "GPU-8c4f2a1e-0d3b-4e5f-a617-2b8c9d0e1f23"),
    ]


def test_nvidia_smi_l_mig_sub_lines_belong_to_their_gpu():
    gpus = parse_nvidia_smi_l(SMI_L_MIG)
    assert [g.uuid for g in gpus] == ["GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"]
    assert gpus[0].migs == (Mig("1g.5gb", 0, "MIG-5c1a2b3d-4e5f-5a6b-9c7d-8e9f0a1b2c3d"),
                            Mig("1g.5gb", 1, "MIG-6d2b3c4e-5f60-5b7c-8d9e-0f1a2b3c4d5e"))
    # what a pod was given exclusively: the MIG devices, not the parent GPU they share
    assert exclusive_ids(gpus) == ["MIG-5c1a2b3d-4e5f-5a6b-9c7d-8e9f0a1b2c3d", "MIG-6d2b3c4e-5f60-5b7c-8d9e-0f1a2b3c4d5e"]


def test_nvidia_smi_l_mig_profile_names_of_every_form():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000001)\n"
            "  MIG 1g.10gb.me   Device  0: (UUID: MIG-00000000-0000-0000-0000-00000000000a)\n"
            "  MIG 1c.3g.20gb   Device  1: (UUID: MIG-00000000-0000-0000-0000-00000000000b)\n")
    assert [m.profile for m in parse_nvidia_smi_l(text)[0].migs] == ["1g.10gb.me", "1c.3g.20gb"]


def test_exclusive_ids_of_whole_gpus_are_their_uuids():
    assert exclusive_ids(parse_nvidia_smi_l(SMI_L)) == ["GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901",
                                                         "GPU-8c4f2a1e-0d3b-4e5f-a617-2b8c9d0e1f23"]


def test_nvidia_smi_l_no_devices():
    assert parse_nvidia_smi_l("No devices were found\n") == []
    assert parse_nvidia_smi_l("") == []
    assert parse_nvidia_smi_l("sh: nvidia-smi: not found") == []


def test_query_csv():
    text = ("index, uuid, pci.bus_id\n"
            "0, GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901, 00000000:07:00.0\n"
            "1, GPU-8c4f2a1e-0d3b-4e5f-a617-2b8c9d0e1f23, 00000000:0F:00.0\n")
    assert parse_query_csv(text) == [
        {"index": "0", "uuid": "GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901", "pci.bus_id": "00000000:07:00.0"},
        {"index": "1", "uuid": "GPU-8c4f2a1e-0d3b-4e5f-a617-2b8c9d0e1f23", "pci.bus_id": "00000000:0F:00.0"},
    ]


def test_query_csv_units_stripped_from_header():
    text = "index, memory.total [MiB]\n0, 40960 MiB\n1, 40960 MiB\n"
    assert parse_query_csv(text) == [{"index": "0", "memory.total": "40960 MiB"},
                                     {"index": "1", "memory.total": "40960 MiB"}]


def test_query_csv_no_devices():
    assert parse_query_csv("No devices were found") == []
    assert parse_query_csv("") == []


TOPO = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tNV12\t0-1\t0\t\tN/A\n"
        "GPU1\tNV12\t X \t2-3\t1\t\tN/A\n"
        "\n"
        "Legend:\n"
        "\n"
        "  X    = Self\n"
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
        "  PIX  = Connection traversing at most a single PCIe bridge\n"
        "  NV#  = Connection traversing a bonded set of # NVLinks\n")


def test_topo_numa():
    assert parse_topo_numa(TOPO) == {"GPU0": 0, "GPU1": 1}


def test_topo_numa_na_is_none():
    text = ("\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            "GPU0\t X \t0-7\tN/A\t\tN/A\n\nLegend:\n\n  X    = Self\n")
    assert parse_topo_numa(text) == {"GPU0": None}


def test_topo_numa_with_nic_rows_and_garbage():
    text = ("\tGPU0\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            "GPU0\t X \tPHB\t0-15\t0\t\tN/A\n"
            "NIC0\tPHB\t X \t\t\t\t\n\nLegend:\n")
    assert parse_topo_numa(text) == {"GPU0": 0}
    assert parse_topo_numa("") == {}
    assert parse_topo_numa("No devices were found") == {}


def test_parse_cpulist():
    assert parse_cpulist("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpulist("5\n") == {5}
    assert parse_cpulist("") == set()


PROC_STATUS = """Name:\tcat
Umask:\t0022
State:\tR (running)
Tgid:\t17
Cpus_allowed:\t00000000,0000000f
Cpus_allowed_list:\t0-3
Mems_allowed:\t00000000,00000001
Mems_allowed_list:\t0
voluntary_ctxt_switches:\t0
"""


def test_cpus_allowed():
    assert cpus_allowed(PROC_STATUS) == {0, 1, 2, 3}
    assert cpus_allowed("Cpus_allowed_list:\t2,4-5") == {2, 4, 5}
    assert cpus_allowed("Name:\tcat\n") == set()


NUMA = {0: parse_cpulist("0-7"), 1: parse_cpulist("8-15")}


def test_alignment_aligned():
    a = alignment({0, 1}, NUMA, {"GPU0": 0})
    assert a.aligned is True
    assert a.cpu_numa == frozenset({0}) and a.gpu_numa == frozenset({0})
    assert "CPUs 0-1 on NUMA [0]" in a.detail and "GPU0@NUMA0" in a.detail


def test_alignment_misaligned():
    a = alignment({0, 1}, NUMA, {"GPU0": 1})
    assert a.aligned is False
    assert "GPU0@NUMA1" in a.detail
    # CPUs spanning two NUMA nodes are misaligned even with the GPU on one of them
    assert alignment({7, 8}, NUMA, {"GPU0": 0}).aligned is False
    assert alignment({0}, NUMA, {"GPU0": 0, "GPU1": 1}).aligned is False


def test_alignment_not_applicable():
    a = alignment({0}, NUMA, {"GPU0": None, "GPU1": 0})
    assert a.aligned is None and "GPU0" in a.detail
    b = alignment({0}, NUMA, {})
    assert b.aligned is None and "no GPU NUMA information" in b.detail


def test_fmt_cpus():
    assert fmt_cpus({0, 1, 2, 5}) == "0-2,5"
    assert fmt_cpus({3}) == "3"
    assert fmt_cpus(set()) == ""
    assert fmt_cpus({1, 3, 4, 5, 9, 10}) == "1,3-5,9-10"
    assert parse_cpulist(fmt_cpus({0, 2, 3, 4, 8, 11, 12})) == {0, 2, 3, 4, 8, 11, 12}


def test_sections():
    log = ("== env ==\nNVIDIA_VISIBLE_DEVICES=GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901\n"
           "== dev ==\n/dev/nvidia0\n"
           "== nvidia-smi -L ==\n" + SMI_L +
           "== numa 0 ==\n0-7\n== numa 1 ==\n8-15\n== end ==\n")
    s = sections(log)
    assert s["env"] == "NVIDIA_VISIBLE_DEVICES=GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"
    assert s["dev"] == "/dev/nvidia0"
    assert len(parse_nvidia_smi_l(s["nvidia-smi -L"])) == 2
    assert s["numa 0"] == "0-7" and s["numa 1"] == "8-15"
    assert s["end"] == ""
    assert sections("text before any section\n") == {}


def test_sections_keep_empty_sections():
    s = sections("== dev ==\n== nvidia-smi -L ==\nNo devices were found\n")
    assert s == {"dev": "", "nvidia-smi -L": "No devices were found"}


VECTOR_ADD_OK = """[Vector addition of 50000 elements]
Copy input data from the host memory to the CUDA device
CUDA kernel launch with 196 blocks of 256 threads
Copy output data from the CUDA device to the host memory
Test PASSED
Done
"""


def test_vector_add_passed():
    r = vector_add_result(VECTOR_ADD_OK, 0)
    assert r.passed and r.code is None


def test_vector_add_passed_text_with_nonzero_exit_is_not_a_pass():
    assert not vector_add_result(VECTOR_ADD_OK, 1).passed


def test_vector_add_no_device():
    log = ("[Vector addition of 50000 elements]\n"
           "Failed to allocate device vector A (error code no CUDA-capable device is detected)!\n")
    r = vector_add_result(log, 1)
    assert not r.passed and r.code == "FAIL-F12-DEVICE-NOT-INJECTED"
    assert "runtime did not inject" in r.cause


def test_vector_add_driver_too_old():
    log = ("[Vector addition of 50000 elements]\n"
           "Failed to allocate device vector A (error code CUDA driver version is insufficient for CUDA runtime "
           "version)!\n")
    r = vector_add_result(log, 1)
    assert not r.passed and r.code == "FAIL-F13-CUDA-FAILURE" and "upgrade the driver" in r.cause


def test_vector_add_unmapped_cuda_error():
    log = "Failed to launch vectorAdd kernel (error code too many resources requested for launch)!\n"
    r = vector_add_result(log, 1)
    assert r.code == "FAIL-F13-CUDA-FAILURE" and "too many resources requested for launch" in r.cause


def test_vector_add_exit_zero_without_pass_fails():
    r = vector_add_result("[Vector addition of 50000 elements]\n", 0)
    assert not r.passed and r.code == "FAIL-F13-CUDA-FAILURE"
    assert "exit code 0" in r.cause and "Test PASSED" in r.cause


def test_cuda_causes_codes_are_known():
    from gpuconform.reasons import REASONS
    assert all(code in REASONS for _, code, _ in probes.CUDA_CAUSES)


# --- Real outputs published in public issues and repositories (testing/unit/samples/, sources in each file) ---

sample = recorded.text  # a published output from testing/unit/samples/, without its '# source/what/note' lines


def test_samples_say_where_they_come_from():
    files = sorted(recorded.SAMPLES.glob("*.txt"))
    assert len(files) >= 8
    for f in files:
        head = [ln for ln in f.read_text().splitlines() if ln.startswith("# ")]
        assert head[0].startswith("# source: ") and any(h.startswith("# what: ") for h in head), f.name
        assert sample(f.name).strip() and not sample(f.name).startswith("# "), f.name


def test_sample_loader_strips_only_the_top_comment_lines(tmp_path, monkeypatch):
    (tmp_path / "x.txt").write_text("# source: a\n# what: b\nGPU0\t X \n  NV#  = bonded\n# not a header\n")
    monkeypatch.setattr(recorded, "SAMPLES", tmp_path)
    assert sample("x.txt") == "GPU0\t X \n  NV#  = bonded\n# not a header\n"


TOPO_SAMPLES = {
    # 8x RTX 4090, NICs, newer driver with 'GPU NUMA ID'
    "topo_8gpu_2numa_gpu_numa_id.txt": {f"GPU{i}": 0 if i < 4 else 1 for i in range(8)},
    # POWER9: NUMA node ids are 0 and 8, no 'GPU NUMA ID'
    "topo_4gpu_numa_0_8_no_gpu_numa_id.txt": {"GPU0": 0, "GPU1": 0, "GPU2": 8, "GPU3": 8},
    # tabs expanded to spaces in the published copy
    "topo_5gpu_spaces_gpu_numa_id.txt": {"GPU0": 1, "GPU1": 0, "GPU2": 0, "GPU3": 0, "GPU4": 0},
    # single GPU, NUMA Affinity N/A (padded with doubled tabs)
    "topo_1gpu_p4_numa_na.txt": {"GPU0": None},
    # driver 440: no NUMA Affinity column at all
    "topo_8gpu_driver440_no_numa_column_spaces.txt": {},
}


@pytest.mark.parametrize("name", sorted(TOPO_SAMPLES))
def test_topo_numa_real_outputs(name):
    assert parse_topo_numa(sample(name)) == TOPO_SAMPLES[name]


def test_topo_numa_real_output_survives_tab_expansion():
    text = sample("topo_8gpu_2numa_gpu_numa_id.txt")
    assert parse_topo_numa(text.expandtabs()) == parse_topo_numa(text) == TOPO_SAMPLES[
        "topo_8gpu_2numa_gpu_numa_id.txt"]


def test_alignment_on_real_8gpu_topology():
    text = sample("topo_8gpu_2numa_gpu_numa_id.txt")
    # the node CPU lists are the CPU Affinity column of the same sample
    assert "\t0-55,112-167\t0\t" in text and "\t56-111,168-223\t1\t" in text
    nodes = {0: parse_cpulist("0-55,112-167"), 1: parse_cpulist("56-111,168-223")}
    assert len(nodes[0]) == len(nodes[1]) == 112 and not nodes[0] & nodes[1]
    numa = parse_topo_numa(text)
    assert alignment({0, 1, 112, 113}, nodes, {"GPU0": numa["GPU0"]}).aligned is True
    assert alignment({0, 1, 112, 113}, nodes, {"GPU4": numa["GPU4"]}).aligned is False
    assert alignment({56, 57}, nodes, {"GPU3": numa["GPU3"], "GPU4": numa["GPU4"]}).aligned is False


def test_alignment_not_applicable_on_real_outputs_without_numa():
    na = alignment({0}, {0: parse_cpulist("0-7")}, parse_topo_numa(sample("topo_1gpu_p4_numa_na.txt")))
    assert na.aligned is None and "GPU0" in na.detail
    old = alignment({0}, {0: parse_cpulist("0-11,24-35")},
                    parse_topo_numa(sample("topo_8gpu_driver440_no_numa_column_spaces.txt")))
    assert old.aligned is None and "no GPU NUMA information" in old.detail


def test_cpus_allowed_real_proc_status():
    text = sample("proc_status_allowed_lists.txt")
    assert cpus_allowed(text) == {4, 5, 6, 7}
    assert fmt_cpus(cpus_allowed(text)) == "4-7"


def test_nvidia_smi_l_real_mig_mixed():
    gpus = parse_nvidia_smi_l(sample("smi_l_a100_mig_mixed.txt"))
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    assert {g.name for g in gpus} == {"NVIDIA A100-SXM4-80GB"}
    assert [g.uuid for g in gpus] == ["GPU-513536b6-7d19-9063-b049-1e69664bb298",
                                      "GPU-d8594bd4-0fc3-8595-e355-7c98138f3b95",
                                      "GPU-5e375e7e-b41f-155b-dcdc-534524c356fc",
                                      "GPU-69ec2344-ebac-b028-f88f-452abb3d7f11"]
    assert [m.profile for m in gpus[0].migs] == ["1g.20gb"] * 4 and all(not g.migs for g in gpus[1:])


def test_nvidia_smi_l_real_plain():
    assert parse_nvidia_smi_l(sample("smi_l_plain_quadro.txt")) == [
        Gpu(0, "Quadro RTX 4000", "GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43"),
        Gpu(1, "Quadro RTX 4000", "GPU-d6de6afc-bdfe-75c4-5273-0544439153fc"),
    ]


def test_query_csv_real_output():
    rows = parse_query_csv(sample("query_csv_name_bus_index_uuid.txt"))
    assert [r["index"] for r in rows] == ["0", "1", "2", "3", "4"]
    assert [r["pci.bus"] for r in rows] == ["0x01", "0x02", "0x03", "0x09", "0x0A"]
    assert rows[1] == {"name": "GeForce GTX 1080 Ti", "pci.bus": "0x02", "index": "1",
                       "uuid": "GPU-15ea7bf9-1a0e-2d7f-9c62-c28e5ca1aaf1"}
    assert all(r["uuid"].startswith("GPU-") for r in rows)


def test_vector_add_real_pass_followed_by_smi_l():
    log = sample("vectoradd_passed_then_smi_l_vgpu.txt")
    assert vector_add_result(log, 0).passed
    assert not vector_add_result(log, 1).passed
    assert parse_nvidia_smi_l(log) == [
        Gpu(0, "NVIDIA RTXA5000-8Q", "GPU-b40d5aa3-6b30-11ef-a128-9bcddb13a8d2")]


def test_vector_add_real_no_device_with_stderr_first():
    r = vector_add_result(sample("vectoradd_no_device.txt"), 1)
    assert not r.passed and r.code == "FAIL-F12-DEVICE-NOT-INJECTED"


def test_vector_add_real_forward_compat():
    r = vector_add_result(sample("vectoradd_forward_compat.txt"), 1)
    assert r.code == "FAIL-F13-CUDA-FAILURE" and "forward-compat" in r.cause


def test_vector_add_real_busy_both_wordings():
    new = vector_add_result(sample("vectoradd_busy_new_wording.txt"), 1)
    assert new.code == "FAIL-F13-CUDA-FAILURE" and "exclusive-process" in new.cause
    # older wording, as quoted in https://github.com/NVIDIA/gpu-operator/issues/129
    old = vector_add_result("Failed to allocate device vector A (error code all CUDA-capable devices are busy "
                            "or unavailable)!\n[Vector addition of 50000 elements]", 1)
    assert old.code == "FAIL-F13-CUDA-FAILURE" and "exclusive-process" in old.cause


def test_vector_add_unmapped_error_keeps_parentheses_inside_the_message(monkeypatch):
    monkeypatch.setattr(probes, "CUDA_CAUSES", [])
    r = vector_add_result(sample("vectoradd_busy_new_wording.txt"), 1)
    assert "'CUDA-capable device(s) is/are busy or unavailable': unmapped cause" in r.cause


def test_sections_carry_real_outputs_unchanged():
    smi_l, topo = sample("smi_l_a100_mig_mixed.txt"), sample("topo_8gpu_2numa_gpu_numa_id.txt")
    s = sections("== nvidia-smi -L ==\n" + smi_l + "== nvidia-smi topo -m ==\n" + topo + "== end ==\n")
    assert s["nvidia-smi topo -m"] == topo.strip("\n") and s["nvidia-smi topo -m"].startswith("\tGPU0\t")
    assert len(parse_nvidia_smi_l(s["nvidia-smi -L"])) == 4
    assert parse_topo_numa(s["nvidia-smi topo -m"]) == TOPO_SAMPLES["topo_8gpu_2numa_gpu_numa_id.txt"]
