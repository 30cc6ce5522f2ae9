// npz_min.hpp: the least a C++17 program needs to read and write fpspec's .npz files: zip archives of
// uncompressed ("stored") .npy arrays (docs/vectors.rst FPS-VEC-1, docs/operands.rst FPS-OPD-1).  No
// third-party library; a little-endian host.  cnpy (github.com/rogersce/cnpy) reads and writes the same.
#pragma once
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

struct Array {  // one .npy array: its dtype ("<u4", "|u1", ...), shape, and raw bytes (C order)
    std::string descr;
    std::vector<size_t> shape;
    std::string data;
};

inline uint32_t rd(const std::string& s, size_t at, int n) {  // little-endian field of n bytes
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v << 8 | uint8_t(s[at + i]);
    return v;
}

inline std::string le(size_t v, int n) {  // v as n little-endian bytes
    std::string s;
    for (int i = 0; i < n; ++i) s += char(v >> 8 * i & 0xFF);
    return s;
}

inline std::map<std::string, Array> read_npz(const std::string& path) {  // name (no ".npy") -> array
    std::ifstream f(path, std::ios::binary);
    std::string z((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::map<std::string, Array> out;
    for (size_t p = 0; z.size() >= p + 30 && rd(z, p, 4) == 0x04034b50;) {  // local file headers
        if (rd(z, p + 8, 2) != 0) throw std::runtime_error(path + ": a compressed member");
        size_t size = rd(z, p + 18, 4), nlen = rd(z, p + 26, 2), xlen = rd(z, p + 28, 2);
        if (size == 0xFFFFFFFF) size = rd(z, p + 30 + nlen + 4, 4);  // a zip64 extra field holds it
        std::string name = z.substr(p + 30, nlen), npy = z.substr(p + 30 + nlen + xlen, size);
        if (npy.compare(0, 7, "\x93NUMPY\x01") != 0) throw std::runtime_error(name + ": not a .npy 1.0");
        size_t d = npy.find("'descr': '") + 10, s = npy.find("'shape': (") + 10;
        Array a{npy.substr(d, npy.find('\'', d) - d), {}, npy.substr(10 + rd(npy, 8, 2))};
        std::istringstream dims(npy.substr(s, npy.find(')', s) - s));
        for (size_t v; dims >> v; dims.ignore(1)) a.shape.push_back(v);
        out[name.substr(0, name.size() - 4)] = a;
        p += 30 + nlen + xlen + size;
    }
    return out;
}

inline uint32_t crc32(const std::string& s) {
    uint32_t c = ~0u;
    for (unsigned char b : s) {
        c ^= b;
        for (int k = 0; k < 8; ++k) c = c >> 1 ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return ~c;
}

inline std::string npy(const Array& a) {  // .npy 1.0: magic, header padded to 64 bytes, data
    std::string shape;
    for (size_t d : a.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    if (a.shape.size() == 1) shape += ",";  // (8, 256), (23,), ()
    std::string dict = "{'descr': '" + a.descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
    dict.append(63 - (dict.size() + 10) % 64, ' ') += '\n';
    return std::string("\x93NUMPY\x01\x00", 8) + le(dict.size(), 2) + dict + a.data;
}

inline void write_npz(const std::string& path, const std::map<std::string, Array>& arrays) {
    std::string zip, dir;  // local headers and data, then the central directory, then its end record
    for (const auto& [name, a] : arrays) {
        std::string data = npy(a), file = name + ".npy";
        std::string head = le(20, 2) + le(0, 4) + le(0, 2) + le(33, 2) + le(crc32(data), 4) + le(data.size(), 4) +
                           le(data.size(), 4) + le(file.size(), 2) + le(0, 2);  // stored, 1980-01-01
        dir += le(0x02014b50, 4) + le(20, 2) + head + le(0, 6) + le(0, 4) + le(zip.size(), 4) + file;
        zip += le(0x04034b50, 4) + head + file + data;
    }
    std::ofstream(path, std::ios::binary) << zip << dir << le(0x06054b50, 4) << le(0, 4) << le(arrays.size(), 2)
                                          << le(arrays.size(), 2) << le(dir.size(), 4) << le(zip.size(), 4) << le(0, 2);
}
