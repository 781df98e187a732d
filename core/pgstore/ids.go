package pgstore

import (
	"crypto/md5"
	"encoding/hex"
	"strconv"
	"time"
)

// GeneratedID is the transactionId a push generated for the message at
// offset off of partition number num, pushed at at, from the push's seed,
// as queen.gen_id makes it in SQL (a test holds the two together; migration
// 0017): a UUIDv7 of that millisecond, version and marker "7a", the number
// of hex digits of the offset and of the partition number, the variant
// digit (8 + the seed's two low bits), and 15 digits: the seed's next bits
// as filler, then the partition number and the offset. Only for an offset
// that fits that form (queen.self_fits); the push returns any other id.
func GeneratedID(at time.Time, num, off, seed int64) string {
	var buf [16]byte
	t := lpadHex(make([]byte, 0, 12), strconv.AppendInt(buf[:0], max(at.UnixMilli(), 0), 16), 12)
	n, o := strconv.FormatInt(num, 16), strconv.FormatInt(off, 16)
	tail := make([]byte, 0, 15)
	if k := 15 - len(n) - len(o); k > 0 {
		tail = lpadHex(tail, strconv.AppendInt(buf[:0], (seed>>2)&(1<<(4*k)-1), 16), k)
	}
	tail = append(append(tail, n...), o...)
	b := make([]byte, 0, 36)
	b = append(append(append(b, t[:8]...), '-'), t[8:]...)
	b = append(b, '-', '7', 'a', hexDigits[len(o)], hexDigits[len(n)], '-', hexDigits[8+seed&3])
	b = append(append(append(b, tail[:3]...), '-'), tail[3:]...)
	return string(b)
}

const hexDigits = "0123456789abcdef"

// lpadHex appends src to dst as SQL's lpad(src, n, '0') gives it: zeros
// before it up to n characters, or its first n.
func lpadHex(dst, src []byte, n int) []byte {
	if len(src) >= n {
		return append(dst, src[:n]...)
	}
	for range n - len(src) {
		dst = append(dst, '0')
	}
	return append(dst, src...)
}

// MessageID is the id of the message at offset off of partition pid,
// derived from its address as queen.message_id derives it in SQL (a test
// holds the two together): the MD5 of "pid:offset" as a UUID.
func MessageID(pid string, off int64) string {
	var in [64]byte // room for "pid:offset": one allocation, the id's
	sum := md5.Sum(strconv.AppendInt(append(append(in[:0], pid...), ':'), off, 10))
	var id [36]byte
	hex.Encode(id[0:8], sum[0:4])
	hex.Encode(id[9:13], sum[4:6])
	hex.Encode(id[14:18], sum[6:8])
	hex.Encode(id[19:23], sum[8:10])
	hex.Encode(id[24:36], sum[10:16])
	id[8], id[13], id[18], id[23] = '-', '-', '-', '-'
	return string(id[:])
}
