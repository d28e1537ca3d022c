import pytest

from gpuwhy.rules.env.cuda_compat import arch_support, driver_supports, visible_devices

ARCHS_2_21 = ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"]


@pytest.mark.parametrize(
    "cc, expected",
    [
        ("8.0", ("native", "sm_80")),
        ("8.6", ("native", "sm_80")),  # cubins run on later minors of the same major
        ("8.9", ("native", "sm_89")),
        ("7.5", ("native", "sm_70")),
        ("9.0", ("native", "compute_90")),  # compute_XY carries SASS for XY as well as PTX
        ("10.0", ("ptx", "compute_90")),  # Blackwell: JIT from Hopper PTX
        ("12.0", ("ptx", "compute_90")),
        ("5.2", ("none", None)),  # Maxwell: older than every arch in the build
        ("3.7", ("none", None)),
    ],
)
def test_arch_support_follows_cuda_binary_compatibility(cc, expected):
    assert arch_support(cc, ARCHS_2_21) == expected


def test_arch_specific_cubins_run_only_on_their_own_gpu():
    assert arch_support("9.0", ["sm_90a"]) == ("native", "sm_90a")
    assert arch_support("10.0", ["sm_90a"]) == ("none", None)
    assert arch_support("10.0", ["sm_100", "compute_120"]) == ("native", "sm_100")
    assert arch_support("9.0", ["sm_80", "sm_90"]) == ("native", "sm_90")
    assert arch_support("10.0", ["sm_80", "sm_90"]) == ("none", None)  # SASS never crosses majors


def test_arch_support_unknown_without_build_archs():
    assert arch_support("9.0", []) == ("unknown", None)


@pytest.mark.parametrize(
    "value, count, expected",
    [
        (None, 4, 4),
        ("", 4, 0),
        ("-1", 4, 0),
        ("none", None, 0),
        ("NoDevFiles", 2, 0),
        ("0", 4, 1),
        ("0,1", 4, 2),
        ("0,-1,1", 4, 1),  # CUDA stops at the first invalid entry
        ("4", 4, 0),
        ("2,7", 4, 1),
        ("GPU-0aaa", 2, 1),
        ("GPU-ffff", 2, 0),
        ("0", None, None),
        ("MIG-5f2e", 1, None),  # MIG instances are not judged from the parent GPUs' UUIDs
    ],
)
def test_visible_devices_parses_like_cuda(value, count, expected):
    assert visible_devices(value, count, ["GPU-0aaa-bbbb", "GPU-1aaa-bbbb"]) == expected


def test_gpu_uuid_is_not_judged_without_known_uuids():
    assert visible_devices("GPU-0aaa", 2, []) is None


@pytest.mark.parametrize(
    "driver_cuda, build_cuda, expected",
    [
        ("12.4", "12.5.1", "minor-compat"),
        ("12.8", "12.5.1", "ok"),
        ("13.0", "12.5.1", "ok"),
        ("11.4", "12.5.1", "too-old"),
        (None, "12.5.1", None),
        ("12.4", None, None),
    ],
)
def test_driver_supports(driver_cuda, build_cuda, expected):
    assert driver_supports(driver_cuda, build_cuda) == expected
