// Intentionally empty: lib/meson.build adds this source to a library whose
// source count is a multiple of unity_size, which Meson 1.0's unity build
// mishandles when libbigset takes the library whole.
