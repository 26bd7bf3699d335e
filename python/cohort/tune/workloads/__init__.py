"""Reference workloads for the tuner: ``nav`` (a 20 Hz LIDAR + planning loop) and ``detect``
(a camera-frame pipeline running convolutional inference). Both report through
:mod:`cohort.tune.protocol`. Run them with ``python -m cohort.tune workload nav|detect``."""
