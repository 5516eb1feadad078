/** An image that unpacks to more than it may (UnpackBudget: the template's disk, template_center.max_image_mb, the entry cap). */
export class ImageTooLargeError extends Error {}

/**
 * What one entry (a file, a directory, a link, a whiteout) costs beyond its tar bytes: a 4 KiB
 * block on the ext4 image less the 512-byte header its tar bytes already count. A layer of a
 * million empty files is half a gigabyte of tar headers but four of disk; counted at its tar
 * bytes alone it passed a budget it then overran (found by a helper reading the template center
 * as an attacker). A file's own bytes are counted as the tar holds them (padded to 512), a little
 * under their blocks on disk; mkfs checks the real fit (build/write-rootfs.ts).
 */
const ENTRY_OVERHEAD_BYTES = 4096 - 512;

/**
 * The most entries one image may unpack to, over all its layers and /etc/skel's copy: large
 * distributions hold a few hundred thousand files; two million is far past any real image and
 * still keeps the inode tables of mkfs.ext4 and the applier's bookkeeping of a layer
 * (apply-layer.ts, createdHere) to a size the template center's memory takes.
 */
const MAX_IMAGE_ENTRIES = 2_000_000;

const MiB = 1_048_576;

/**
 * What an image may still unpack to: bytes (the tar streams' own, and ENTRY_OVERHEAD_BYTES for
 * every entry) and entries. One budget follows a build from its first layer to the copy of
 * /etc/skel into the new user's home (rootfs/skel-copy.ts), so neither can pass what the other
 * left.
 */
export class UnpackBudget {
  private bytesLeft: number;
  private entries = 0;

  constructor(readonly maxBytes = Infinity, readonly maxEntries = MAX_IMAGE_ENTRIES) {
    this.bytesLeft = maxBytes;
  }

  /** Counts `n` bytes of `label`; throws ImageTooLargeError once the image is past its bytes. */
  takeBytes(n: number, label: string): void {
    this.bytesLeft -= n;
    if (this.bytesLeft < 0) {
      throw new ImageTooLargeError(`${label} unpacks past ${Math.ceil(this.maxBytes / MiB)} MiB, the most this image may take (its disk_size_mb, or template_center.max_image_mb)`);
    }
  }

  /** Counts one entry of `label` (and its overhead in bytes); throws ImageTooLargeError past either cap. */
  takeEntry(label: string): void {
    if (++this.entries > this.maxEntries) {
      throw new ImageTooLargeError(`${label} unpacks to more than ${this.maxEntries} files, directories and links, the most an image may have`);
    }
    this.takeBytes(ENTRY_OVERHEAD_BYTES, label);
  }
}
