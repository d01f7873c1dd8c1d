"""The test bed's stand-in for nvidia-container-runtime (the containerd runtime handler `nvidia`; README.md).

containerd's runc shim runs `nvidia-runtime-sim` wherever it would run runc; that shell front end runs main() here
for a `create` whose spec this may change, and runc (through runc-oom-clamp.sh where needed) otherwise. As
NVIDIA/nvidia-container-toolkit's runtime does (internal/oci/args.go GetBundleDirFromArgs, HasCreateSubcommand), it
edits the bundle's config.json on `create` only and then execs `runc` with the same arguments; every other command
passes through untouched. Its edits:

- where this host denies negative oom_score_adj (env GPU_SIM_OOM_CLAMP=1, or the file <GPU_SIM_ROOT>/oom-clamp that
  gpunode.py runc_binary() writes), negative process.oomScoreAdj is clamped to 0, as runc-oom-clamp.sh does;
- devices requested by the container's own NVIDIA_VISIBLE_DEVICES are injected the way the simulated device
  plugin's Allocate injects them (images/internal/plugin/devices.go ContainerAllocate), but only where the toolkit
  would honour the variable (internal/config/image/cuda_image.go VisibleDevices): in a privileged container
  (CAP_SYS_ADMIN in the bounding set, internal/config/image/privileged.go) or when
  accept-nvidia-visible-devices-envvar-when-unprivileged is on. <GPU_SIM_ROOT>/runtime.json
  {"acceptEnvvarUnprivileged": true} turns it on (the toolkit's shipped default, api/config/v1/config.go
  GetDefault); absent or malformed, it is off (the device plugin's volume-mounts setup), so devices come only from
  what Allocate injected.

It never breaks a container on its own account: any problem is logged and runc runs on the unedited (or partly
edited) spec. It logs to <GPU_SIM_ROOT>/runtime.log, not stderr: during `create` the shim hands runc the
container's stdio, so stderr would land in the pod's log (the toolkit logs to its own file as well).
Standard library only; the shim runs it with the system python3.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time

DEFAULT_ROOT = "/var/lib/gpu-sim"
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
CONTAINER_INFO_DIR = "/run/gpu-sim"  # images/internal/hw/hw.go ContainerInfoDir
# The bed's toolkit settings (config.toml accept-nvidia-visible-devices-envvar-when-unprivileged and
# accept-nvidia-visible-devices-as-volume-mounts): the hardened pair the plugin's volume-mounts strategy is for.
DEFAULTS = {"acceptEnvvarUnprivileged": False, "acceptDeviceListAsVolumeMounts": True}
# Where the device plugin's volume-mounts strategy puts the device list: one /dev/null mount per device ID
# (NVIDIA/k8s-device-plugin internal/plugin/server.go deviceListAsVolumeMountsContainerPathRoot; the toolkit's
# internal/config/image/cuda_image.go DeviceListAsVolumeMountsRoot).
DEVICE_LIST_ROOT = "/var/run/nvidia-container-devices"
# The driver's NVML library and, next to it, the mock's hardware description: what the toolkit mounts into a
# container whose device request it honours (the driver's libraries; here the mock NVML under the driver root).
DRIVER_LIB_DIR = "/usr/lib/x86_64-linux-gnu"
DRIVER_FILES = ("libnvidia-ml.so.1", "mocknvml.conf")


def root() -> str:
    return os.environ.get("GPU_SIM_ROOT") or DEFAULT_ROOT


def log(msg: str, where: str | None = None) -> None:
    """Appends one line to <root>/runtime.log (GPU_SIM_RUNTIME_LOG overrides); stderr only if that fails."""
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} nvidia-runtime-sim[{os.getpid()}]: {msg}\n"
    path = os.environ.get("GPU_SIM_RUNTIME_LOG") or os.path.join(where or root(), "runtime.log")
    try:
        with open(path, "a") as f:
            f.write(line)
    except OSError:
        sys.stderr.write(line)


# ---------------------------------------------------------------- settings and arguments

def load_settings(sim_root: str) -> dict:
    """runtime.json merged over DEFAULTS; a missing file is the defaults, a malformed file or value is logged and
    the default kept."""
    path = os.path.join(sim_root, "runtime.json")
    out = dict(DEFAULTS)
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return out
    except (OSError, ValueError) as e:
        log(f"{path} unusable, using the defaults {DEFAULTS}: {e}", sim_root)
        return out
    if not isinstance(data, dict):
        log(f"{path} is not a JSON object, using the defaults {DEFAULTS}", sim_root)
        return out
    for key, value in data.items():
        if key not in DEFAULTS:
            log(f"{path}: unknown key {key!r} ignored", sim_root)
        elif not isinstance(value, bool):
            log(f"{path}: {key} must be true or false, not {value!r}; keeping {DEFAULTS[key]}", sim_root)
        else:
            out[key] = value
    return out


def oom_clamp_wanted(sim_root: str) -> bool:
    env = os.environ.get("GPU_SIM_OOM_CLAMP")
    if env in ("0", "1"):
        return env == "1"
    return os.path.exists(os.path.join(sim_root, "oom-clamp"))


def _is_bundle_flag(arg: str) -> bool:
    return arg.startswith("-") and arg.lstrip("-") in ("b", "bundle")


def bundle_dir(args: list[str]) -> str | None:
    """The --bundle/-bundle/-b value ("--bundle DIR" or "--bundle=DIR"; the last one wins), else None
    (runc then uses its working directory). NVIDIA/nvidia-container-toolkit internal/oci/args.go
    GetBundleDirFromArgs."""
    found = None
    i = 0
    while i < len(args):
        flag, eq, value = args[i].partition("=")
        if _is_bundle_flag(flag):
            if eq:
                found = value
            elif i + 1 < len(args):
                found = args[i + 1]
                i += 1
        i += 1
    return found


def has_create(args: list[str]) -> bool:
    """A `create` subcommand, not a bundle directory named create (internal/oci/args.go HasCreateSubcommand)."""
    previous_was_bundle = False
    for a in args:
        if not previous_was_bundle and _is_bundle_flag(a):
            previous_was_bundle = True
            continue
        if not previous_was_bundle and a == "create":
            return True
        previous_was_bundle = False
    return False


# ---------------------------------------------------------------- the spec

def last_env(env: list[str] | None, name: str) -> str | None:
    """The value of the LAST `name=...` entry: the toolkit builds a map from the list, later entries overwriting
    earlier ones (internal/config/image/builder.go WithEnv). The kubelet puts the container's own variables after
    the device plugin's (pkg/kubelet/kubelet_pods.go GenerateRunContainerOptions), so the container's wins."""
    value = None
    for entry in env or []:
        key, sep, v = entry.partition("=")
        if sep and key == name:
            value = v
    return value


def is_privileged(spec: dict) -> bool:
    caps = (spec.get("process") or {}).get("capabilities") or {}
    return "CAP_SYS_ADMIN" in (caps.get("bounding") or [])


def clamp_oom(spec: dict) -> bool:
    """Negative process.oomScoreAdj -> 0 (runc-oom-clamp.sh); True when it changed the spec."""
    proc = spec.get("process")
    if isinstance(proc, dict) and isinstance(proc.get("oomScoreAdj"), int) and proc["oomScoreAdj"] < 0:
        proc["oomScoreAdj"] = 0
        return True
    return False


def requested_devices(value: str | None, hardware: dict, sim_root: str) -> list[tuple[dict, dict | None]]:
    """(gpu, mig device or None) for an NVIDIA_VISIBLE_DEVICES value: `all` is every GPU and every MIG device;
    `void`, `none`, empty or unset nothing (internal/config/image/devices.go NewVisibleDevices); otherwise a comma
    list of GPU UUIDs, GPU indexes and MIG UUIDs. IDs not on this host are logged and skipped (the real toolkit
    fails the container instead; this stand-in never does)."""
    if value is None or value.strip() in ("", "void", "none"):
        return []
    gpus = sorted(hardware.get("gpus") or [], key=lambda g: g.get("index", 0))
    if value.strip() == "all":
        return [(g, None) for g in gpus] + [(g, m) for g in gpus for m in g.get("migDevices") or []]
    out: list[tuple[dict, dict | None]] = []
    for token in (t.strip() for t in value.split(",")):
        match = None
        for g in gpus:
            if token in (g.get("uuid"), str(g.get("index"))):
                match = (g, None)
            for m in g.get("migDevices") or []:
                if token == m.get("uuid"):
                    match = (g, m)
        if match is None:
            log(f"{VISIBLE_DEVICES}: no device {token!r} on this host; skipped", sim_root)
        elif match not in out:
            out.append(match)
    return out


def device_info(gpu: dict, hardware: dict, mig: dict | None = None) -> dict:
    """The file the plugin writes to <root>/run/<uuid>.json (images/internal/hw/hw.go DeviceInfo: the GPU's entry
    without migDevices, then driverVersion, cudaVersion and, for a MIG device, mig), in the plugin's field order."""
    info = {k: gpu.get(k) for k in ("index", "uuid", "name", "pciBusId", "numaNode", "memoryTotalMiB", "minor")}
    info.update(driverVersion=hardware.get("driverVersion", ""), cudaVersion=hardware.get("cudaVersion", ""))
    if mig is not None:
        info["mig"] = {k: mig.get(k) for k in ("profile", "uuid", "gi", "ci")}
    return info


def ensure_info_file(sim_root: str, gpu: dict, hardware: dict, mig: dict | None = None) -> str:
    """<root>/run/<uuid>.json, written from hardware.json only when missing: the plugin writes every device's file
    when it starts and on each hardware change (images/internal/plugin/plugin.go writeDeviceInfos), with its own
    driver version override, which this must not overwrite."""
    dev_uuid = (mig or gpu)["uuid"]
    path = os.path.join(sim_root, "run", dev_uuid + ".json")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(json.dumps(device_info(gpu, hardware, mig), indent=2) + "\n")
        os.replace(tmp, path)
    return path


def inject(spec: dict, sim_root: str, hardware: dict, devices: list[tuple[dict, dict | None]]) -> list[str]:
    """Adds what Allocate's response makes containerd add, per device: the GPU's device node /dev/nvidia<minor>
    (linux.devices, char, the host node's major/minor and mode; the parent's for a MIG device, once) with a
    linux.resources.devices allow rule (access "rw", the plugin's DeviceSpec permissions), and the device's info
    file bind-mounted read-only at /run/gpu-sim/<uuid>.json. Entries the spec already has are left alone. Returns
    the container paths it added."""
    linux = spec.setdefault("linux", {})
    devs = linux.setdefault("devices", [])
    rules = linux.setdefault("resources", {}).setdefault("devices", [])
    mounts = spec.setdefault("mounts", [])
    have_dev = {d.get("path") for d in devs}
    have_mnt = {m.get("destination") for m in mounts}
    added = []
    for gpu, mig in devices:
        node = f"/dev/nvidia{gpu['minor']}"
        host = os.path.join(sim_root, "dev", f"nvidia{gpu['minor']}")
        try:
            st = os.stat(host)
        except OSError as e:
            log(f"{host}: {e}; device {(mig or gpu)['uuid']} not injected", sim_root)
            continue
        if not stat.S_ISCHR(st.st_mode):
            log(f"{host} is not a character device; device {(mig or gpu)['uuid']} not injected", sim_root)
            continue
        if node not in have_dev:
            major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
            devs.append({"path": node, "type": "c", "major": major, "minor": minor,
                         "fileMode": stat.S_IMODE(st.st_mode), "uid": 0, "gid": 0})
            rules.append({"allow": True, "type": "c", "major": major, "minor": minor, "access": "rw"})
            have_dev.add(node)
            added.append(node)
        dest = f"{CONTAINER_INFO_DIR}/{(mig or gpu)['uuid']}.json"
        if dest not in have_mnt:
            try:
                source = ensure_info_file(sim_root, gpu, hardware, mig)
            except OSError as e:
                log(f"info file of {(mig or gpu)['uuid']}: {e}; not mounted", sim_root)
                continue
            mounts.append({"destination": dest, "type": "bind", "source": source,
                           "options": ["rbind", "rprivate", "ro"]})
            have_mnt.add(dest)
            added.append(dest)
    return added


def load_hardware(sim_root: str) -> dict | None:
    path = os.path.join(sim_root, "hardware.json")
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        log(f"{path} unusable; no devices injected: {e}", sim_root)
        return None
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        log(f"{path} has no gpus list; no devices injected", sim_root)
        return None
    return data


def device_list_from_mounts(spec: dict) -> str | None:
    """The device IDs the plugin's volume-mounts strategy passed (mount destinations under DEVICE_LIST_ROOT), as
    an NVIDIA_VISIBLE_DEVICES value, or None when there are none."""
    ids = [m["destination"][len(DEVICE_LIST_ROOT) + 1:] for m in spec.get("mounts") or []
           if isinstance(m, dict) and str(m.get("destination", "")).startswith(DEVICE_LIST_ROOT + "/")]
    return ",".join(i for i in ids if i and "/" not in i) or None


def inject_driver(spec: dict, sim_root: str) -> list[str]:
    """Bind-mounts the driver root's NVML library and its config read-only at DRIVER_LIB_DIR, where the dynamic
    loader finds libnvidia-ml.so.1 (those present on the host; entries the spec already has are left alone)."""
    mounts = spec.setdefault("mounts", [])
    have = {m.get("destination") for m in mounts}
    added = []
    for name in DRIVER_FILES:
        source, dest = os.path.join(sim_root, DRIVER_LIB_DIR.lstrip("/"), name), f"{DRIVER_LIB_DIR}/{name}"
        if dest not in have and os.path.isfile(source):
            mounts.append({"destination": dest, "type": "bind", "source": source, "options": ["rbind", "rprivate", "ro"]})
            added.append(dest)
    return added


def edit_spec(spec: dict, sim_root: str, settings: dict, clamp: bool, create: bool) -> bool:
    """Applies the clamp and, on create, the device request the toolkit would honour (internal/config/image/
    cuda_image.go VisibleDevices: the volume-mount list first, where accepted; then NVIDIA_VISIBLE_DEVICES in a
    privileged container or where accepted when unprivileged); True when the spec changed."""
    changed = clamp and clamp_oom(spec)
    if not create:
        return changed
    value = device_list_from_mounts(spec) if settings["acceptDeviceListAsVolumeMounts"] else None
    source = "volume mounts" if value else VISIBLE_DEVICES
    if value is None:
        value = last_env((spec.get("process") or {}).get("env"), VISIBLE_DEVICES)
        if value is None or value.strip() in ("", "void"):
            return changed
        if not (is_privileged(spec) or settings["acceptEnvvarUnprivileged"]):
            # The toolkit warns likewise (internal/config/image/cuda_image.go VisibleDevices).
            log(f"Ignoring devices requested by environment variable(s) in unprivileged container: "
                f"[{VISIBLE_DEVICES}={value}]", sim_root)
            return changed
    hardware = load_hardware(sim_root)
    if hardware is None:
        return changed
    added = inject(spec, sim_root, hardware, requested_devices(value, hardware, sim_root))
    added += inject_driver(spec, sim_root)
    if added:
        log(f"{source} {VISIBLE_DEVICES}={value} honoured: injected {', '.join(added)}", sim_root)
    return changed or bool(added)


def process_bundle(bundle: str, sim_root: str, create: bool) -> None:
    """Reads, edits and (if changed) atomically rewrites <bundle>/config.json; never raises."""
    path = os.path.join(bundle, "config.json")
    try:
        clamp = oom_clamp_wanted(sim_root)
        settings = load_settings(sim_root) if create else dict(DEFAULTS)
        with open(path) as f:
            spec = json.load(f)
        if not isinstance(spec, dict) or not edit_spec(spec, sim_root, settings, clamp, create):
            return
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(spec, f, separators=(",", ":"))
        os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(tmp, path)
    except FileNotFoundError:
        return  # no spec to edit (runc reports a missing one itself)
    except Exception as e:  # noqa: BLE001 - the container must start as runc alone would start it
        log(f"{path}: left as it was: {type(e).__name__}: {e}", sim_root)


def main(argv: list[str]) -> None:
    args = argv[1:]
    bundle = bundle_dir(args)
    create = has_create(args)
    if bundle is not None or create:  # runc-oom-clamp.sh edits on any --bundle; the toolkit on create
        process_bundle(bundle if bundle is not None else os.getcwd(), root(), create)
    os.execvp("runc", ["runc", *args])


if __name__ == "__main__":
    main(sys.argv)
